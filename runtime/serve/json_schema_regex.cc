#include "runtime/serve/json_schema_regex.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "runtime/serve/json_number_range.h"
#include "runtime/serve/json_string_pattern.h"
#include "runtime/serve/json_value_regex.h"
#include "runtime/serve/regex_dfa.h"

namespace tpserve::serve {
namespace {

constexpr int kAnyNesting = 3;              // arrays/objects inside a value of an open schema
constexpr size_t kMaxRegexSize = 1u << 20;  // bytes of regex: a bound on $ref fan-out and long unrolls

// Keywords that constrain instances in ways a regex here cannot express.
// clang-format off
const std::set<std::string, std::less<>> kRefused = {
    "not", "if", "then", "else", "patternProperties", "propertyNames", "dependentRequired", "dependentSchemas",
    "dependencies", "multipleOf", "contains", "minContains", "maxContains", "prefixItems", "additionalItems",
    "unevaluatedProperties", "unevaluatedItems", "minProperties", "maxProperties", "$dynamicRef", "$recursiveRef"};
// clang-format on
// Keywords that constrain one type (apply only to instances of that type).
const std::set<std::string, std::less<>> kObjectKeywords = {"properties", "required", "additionalProperties"};
const std::set<std::string, std::less<>> kArrayKeywords = {"items", "minItems", "maxItems", "uniqueItems"};
const std::set<std::string, std::less<>> kStringKeywords = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string, std::less<>> kNumberKeywords = {"minimum", "maximum", "exclusiveMinimum",
                                                            "exclusiveMaximum"};
// A schema holds at most one of these, alone but for annotations ("type" may come with enum/const).
const std::vector<std::string> kCombinators = {"$ref", "allOf", "anyOf", "oneOf", "enum", "const"};

std::string pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

template <typename Json>
class Converter {
 public:
  Converter(const Json& root, const JsonSchemaRegexOptions& options)
      : root_(root), ws_(regex_group(options.whitespace)), max_depth_(options.max_depth) {
    try {
      check_regex(options.whitespace);
    } catch (const Error& e) {
      throw Error(std::string("json schema: the whitespace pattern: ") + e.what());
    }
  }

  std::string convert() { return value(root_, "", 0); }

 private:
  const Json& root_;
  std::string ws_;
  int max_depth_;
  std::vector<std::string> refs_;  // the $refs being expanded (to refuse recursion)

  [[noreturn]] static void fail(const std::string& pointer, const std::string& what) {
    throw Error("json schema: " + (pointer.empty() ? std::string() : pointer + ": ") + what);
  }

  std::string dump(const Json& v, const std::string& pointer) const {
    try {
      return v.dump();
    } catch (const nlohmann::json::exception& e) {
      fail(pointer, std::string("cannot write the value as JSON: ") + e.what());
    }
  }

  size_t count(const Json& s, const std::string& pointer, const char* key) const {
    const Json& v = s[key];
    if (!v.is_number_integer() || v.template get<long long>() < 0) {
      fail(pointer + "/" + key, "must be a non-negative integer");
    }
    return v.template get<size_t>();
  }

  std::string value(const Json& s, const std::string& pointer, int depth) {
    if (depth > max_depth_) {
      fail(pointer, "nested deeper than max_depth (" + std::to_string(max_depth_) + ")");
    }
    if (s.is_boolean()) {
      if (!s.template get<bool>()) fail(pointer, "the schema 'false' matches nothing");
      return any(depth);
    }
    if (!s.is_object()) fail(pointer, "a schema must be an object or a boolean");
    std::string regex = constrained(s, pointer, depth);
    if (regex.size() > kMaxRegexSize) {
      fail(pointer, "the schema expands to a regex of more than " + std::to_string(kMaxRegexSize) + " bytes");
    }
    return regex;
  }

  std::string constrained(const Json& s, const std::string& pointer, int depth) {
    std::string combinator;
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& key = it.key();
      if (kRefused.count(key) || (key == "uniqueItems" && it.value() == true) ||
          (key == "items" && it.value().is_array())) {
        fail(pointer, "unsupported keyword '" + key + "'" + (key == "items" ? " (an array of schemas)" : ""));
      }
      if (std::find(kCombinators.begin(), kCombinators.end(), key) == kCombinators.end()) continue;
      if (!combinator.empty()) fail(pointer, "'" + key + "' beside '" + combinator + "' is not supported");
      combinator = key;
    }
    if (!combinator.empty()) {
      for (auto it = s.begin(); it != s.end(); ++it) {
        const std::string& key = it.key();
        const bool with_type = key == "type" && (combinator == "enum" || combinator == "const");
        if (!with_type && (key == "type" || kObjectKeywords.count(key) || kArrayKeywords.count(key) ||
                           kStringKeywords.count(key) || kNumberKeywords.count(key))) {
          fail(pointer, "'" + key + "' beside '" + combinator + "' is not supported");
        }
      }
      return combined(s, combinator, pointer, depth);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      types = type_names(s["type"], pointer);
    } else {
      // No type: the types whose keywords appear (any value when none do).
      auto has_any = [&](const std::set<std::string, std::less<>>& keywords) {
        return std::any_of(keywords.begin(), keywords.end(),
                           [&](const std::string& k) { return s.contains(k); });
      };
      if (has_any(kObjectKeywords)) types.push_back("object");
      if (has_any(kArrayKeywords)) types.push_back("array");
      if (has_any(kStringKeywords)) types.push_back("string");
      // Number keywords with a number (draft 4's boolean exclusives alone bound nothing).
      if (std::any_of(kNumberKeywords.begin(), kNumberKeywords.end(),
                      [&](const std::string& k) { return s.contains(k) && s[k].is_number(); }))
        types.push_back("number");
      if (types.empty()) return any(depth);
    }
    std::vector<std::string> alternatives;
    for (const std::string& type : types) alternatives.push_back(typed(s, type, pointer, depth));
    return regex_alternation(alternatives);
  }

  std::vector<std::string> type_names(const Json& type, const std::string& pointer) const {
    static const std::vector<std::string> kTypes = {"string", "integer", "number", "boolean",
                                                    "null",   "object",  "array"};
    std::vector<std::string> names;
    for (const Json& t : type.is_array() ? type : Json::array({type})) {
      if (!t.is_string() ||
          std::find(kTypes.begin(), kTypes.end(), t.template get<std::string>()) == kTypes.end()) {
        fail(pointer + "/type", "unknown type " + dump(t, pointer));
      }
      names.push_back(t.template get<std::string>());
    }
    if (names.empty()) fail(pointer + "/type", "an empty list of types matches nothing");
    // "number" covers "integer"; a repeated type adds nothing.
    if (std::find(names.begin(), names.end(), "number") != names.end()) std::erase(names, "integer");
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
  }

  static bool has_type(const Json& v, const std::string& type) {
    if (type == "string") return v.is_string();
    if (type == "integer") return v.is_number_integer();
    if (type == "number") return v.is_number();
    if (type == "boolean") return v.is_boolean();
    if (type == "null") return v.is_null();
    if (type == "object") return v.is_object();
    return v.is_array();
  }

  std::string combined(const Json& s, const std::string& combinator, const std::string& pointer, int depth) {
    const Json& arg = s[combinator];
    const std::string at = pointer + "/" + pointer_token(combinator);
    if (combinator == "$ref") return reference(arg, at, depth);
    if (combinator == "enum" || combinator == "const") {
      if (combinator == "enum" && (!arg.is_array() || arg.empty())) fail(at, "must be a non-empty array");
      const std::vector<std::string> types =
          s.contains("type") ? type_names(s["type"], pointer) : std::vector<std::string>{};
      std::vector<std::string> alternatives;
      for (const Json& v : combinator == "enum" ? arg : Json::array({arg})) {
        const bool typed_ok =
            types.empty() ||
            std::any_of(types.begin(), types.end(), [&](const std::string& t) { return has_type(v, t); });
        if (typed_ok) alternatives.push_back(regex_escape(dump(v, at)));
      }
      if (alternatives.empty()) fail(at, "no value has the schema's type");
      return regex_alternation(alternatives);
    }
    if (!arg.is_array() || arg.empty()) fail(at, "must be a non-empty array of schemas");
    if (combinator == "allOf") {
      if (arg.size() != 1) fail(at, "'allOf' of more than one schema is not supported");
      return value(arg[0], at + "/0", depth + 1);  // a level too: nested combinators are bounded
    }
    std::vector<std::string> alternatives;
    for (size_t i = 0; i < arg.size(); ++i) {
      alternatives.push_back(value(arg[i], at + "/" + std::to_string(i), depth + 1));
    }
    return regex_alternation(alternatives);
  }

  std::string reference(const Json& ref, const std::string& at, int depth) {
    if (!ref.is_string()) fail(at, "must be a string");
    const std::string target = ref.template get<std::string>();
    if (target.empty() || target[0] != '#' || (target.size() > 1 && target[1] != '/')) {
      fail(at, "only local references ('#/...') are supported, not '" + target + "'");
    }
    const std::string path = target.substr(1);
    const Json* resolved = nullptr;
    try {
      const typename Json::json_pointer ptr(path);
      if (root_.contains(ptr)) resolved = &root_.at(ptr);
    } catch (const nlohmann::json::exception&) {
    }
    if (resolved == nullptr) fail(at, "reference '" + target + "' does not resolve");
    if (std::find(refs_.begin(), refs_.end(), target) != refs_.end()) {
      fail(at, "recursive reference '" + target + "' is not supported");
    }
    refs_.push_back(target);
    std::string regex = value(*resolved, path, depth + 1);
    refs_.pop_back();
    return regex;
  }

  std::string typed(const Json& s, const std::string& type, const std::string& pointer, int depth) {
    if (type == "string") return string_value(s, pointer);
    if (type == "integer" || type == "number") return number_value(s, type == "integer", pointer);
    if (type == "boolean") return json_boolean_regex();
    if (type == "null") return "null";
    if (type == "object") return object_value(s, pointer, depth);
    return array_value(s, pointer, depth);
  }

  // One side's bound: `plain` (minimum / maximum) and `exclusive` (exclusiveMinimum / exclusiveMaximum: a
  // number, or draft 4's boolean that makes `plain` exclusive), the stricter where both are given; `key`
  // names the keyword it came from.
  struct Bound {
    long double value = 0;
    bool exclusive = false;
    const char* key = "";
    std::string text;  // the value as JSON writes it
  };
  static_assert(std::numeric_limits<long double>::digits >= 64, "64-bit integer bounds held exactly");
  std::optional<Bound> bound(const Json& s, const std::string& pointer, const char* plain,
                             const char* exclusive, bool lower) const {
    auto number = [&](const char* key) -> long double {
      const Json& v = s[key];
      if (v.is_number_unsigned()) return static_cast<long double>(v.template get<uint64_t>());
      if (v.is_number_integer()) return static_cast<long double>(v.template get<int64_t>());
      if (!v.is_number()) fail(pointer + "/" + key, "must be a number");
      return v.template get<double>();
    };
    std::optional<Bound> out;
    auto take = [&](Bound b) {
      const bool stricter = !out || (lower ? b.value > out->value : b.value < out->value) ||
                            (b.value == out->value && b.exclusive);
      if (stricter) out = b;
    };
    const bool draft4_exclusive = s.contains(exclusive) && s[exclusive].is_boolean();
    if (s.contains(plain))
      take({number(plain), draft4_exclusive && s[exclusive].template get<bool>(), plain, s[plain].dump()});
    if (s.contains(exclusive) && !draft4_exclusive)
      take({number(exclusive), true, exclusive, s[exclusive].dump()});
    return out;
  }

  // A bound as a 64-bit value: beyond the 64-bit range an upper bound above it and a lower bound below it are
  // clamped to it (narrowing: every value written still holds); the other two leave nothing to write.
  static int64_t clamp_to_int64(long double v, bool lower) {
    constexpr long double kMax = static_cast<long double>(std::numeric_limits<int64_t>::max());
    constexpr long double kMin = static_cast<long double>(std::numeric_limits<int64_t>::min());
    if (v > kMax) {
      if (lower) throw Error("a lower bound beyond the 64-bit integer range leaves no value to write");
      return std::numeric_limits<int64_t>::max();
    }
    if (v < kMin) {
      if (!lower) throw Error("an upper bound beyond the 64-bit integer range leaves no value to write");
      return std::numeric_limits<int64_t>::min();
    }
    return static_cast<int64_t>(v);
  }

  // An integer or a number within the schema's bounds (json_number_range.h): integers from the bounds rounded
  // inward; numbers within their decimal bounds, then written without an exponent.
  std::string number_value(const Json& s, bool integer, const std::string& pointer) const {
    const std::optional<Bound> lo = bound(s, pointer, "minimum", "exclusiveMinimum", true);
    const std::optional<Bound> hi = bound(s, pointer, "maximum", "exclusiveMaximum", false);
    if (!lo && !hi) return integer ? json_integer_regex() : json_number_regex();
    try {
      if (integer) {
        auto inward = [](const std::optional<Bound>& b, bool lower) -> std::optional<int64_t> {
          if (!b) return std::nullopt;
          return clamp_to_int64(lower ? (b->exclusive ? std::floor(b->value) + 1 : std::ceil(b->value))
                                      : (b->exclusive ? std::ceil(b->value) - 1 : std::floor(b->value)),
                                lower);
        };
        return json_integer_range_regex(inward(lo, true), inward(hi, false));
      }
      auto decimal = [](const std::optional<Bound>& b, bool lower) -> std::optional<NumberBound> {
        if (!b) return std::nullopt;
        if (std::optional<NumberBound> d = parse_number_bound(b->text, b->exclusive)) return d;
        // Beyond the 64-bit range: clamped as for integers (the extreme itself is then allowed).
        return integer_number_bound(clamp_to_int64(b->value, lower));
      };
      return json_number_range_regex(decimal(lo, true), decimal(hi, false));
    } catch (const Error& e) {
      fail(pointer, e.what());
    }
  }

  std::string string_value(const Json& s, const std::string& pointer) const {
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    const std::string format =
        s.contains("format") && s["format"].is_string() ? s["format"].template get<std::string>() : "";
    const std::string content = json_format_regex(format);
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) fail(pointer + "/pattern", "must be a string");
      if (lengths || !content.empty()) {
        fail(pointer, "'pattern' with 'minLength', 'maxLength' or 'format' is not supported");
      }
      return "\"" +
             regex_group(embedded_pattern(s["pattern"].template get<std::string>(), pointer + "/pattern")) +
             "\"";
    }
    if (!content.empty()) {
      if (lengths) fail(pointer, "'format' with 'minLength' or 'maxLength' is not supported");
      return "\"" + content + "\"";
    }
    const size_t min = s.contains("minLength") ? count(s, pointer, "minLength") : 0;
    const long long max =
        s.contains("maxLength") ? static_cast<long long>(count(s, pointer, "maxLength")) : -1;
    if (max >= 0 && static_cast<size_t>(max) < min) fail(pointer, "'maxLength' is less than 'minLength'");
    return json_string_regex(min, max);
  }

  // A user's pattern as the string's content (json_string_pattern.h), checked on its own so that its errors
  // point into it.
  static std::string embedded_pattern(const std::string& pattern, const std::string& at) {
    try {
      std::string content = json_string_pattern(pattern);
      check_regex(content);  // its size errors point here too
      return content;
    } catch (const Error& e) {
      fail(at, e.what());
    }
  }

  std::string array_value(const Json& s, const std::string& pointer, int depth) {
    std::string item;
    const bool open = !s.contains("items") || s["items"] == true;
    if (open) {
      item = nested_any(depth);
    } else if (s["items"] != false) {
      item = value(s["items"], pointer + "/items", depth + 1);
    }
    const size_t min = s.contains("minItems") ? count(s, pointer, "minItems") : 0;
    long long max = s.contains("maxItems") ? static_cast<long long>(count(s, pointer, "maxItems")) : -1;
    if (!open && s["items"] == false) max = 0;
    if (max >= 0 && static_cast<size_t>(max) < min) {
      fail(pointer, "'maxItems' is less than 'minItems' (or 'items' is false)");
    }
    return json_array_regex(item, min, max, ws_);
  }

  std::string object_value(const Json& s, const std::string& pointer, int depth) {
    const Json empty = Json::object();
    const Json& properties = s.contains("properties") ? s["properties"] : empty;
    if (!properties.is_object()) fail(pointer + "/properties", "must be an object");
    std::vector<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(pointer + "/required", "must be an array of strings");
      for (const Json& name : s["required"]) {
        if (!name.is_string()) fail(pointer + "/required", "must be an array of strings");
        required.push_back(name.template get<std::string>());
        if (!properties.contains(required.back())) {
          fail(pointer + "/required", "required property " + dump(name, pointer) + " is not in 'properties'");
        }
      }
    }
    if (properties.empty()) {
      const Json* extra = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
      if (extra != nullptr && *extra == false) return R"(\{)" + ws_ + R"(\})";
      const std::string member_value = extra != nullptr && extra->is_object()
                                           ? value(*extra, pointer + "/additionalProperties", depth + 1)
                                           : nested_any(depth);
      return json_map_regex(member_value, ws_);
    }
    // "key" ws : ws value, for each property that can be present, and whether it must be.
    std::vector<std::pair<std::string, bool>> members;
    for (auto it = properties.begin(); it != properties.end(); ++it) {
      const bool must = std::find(required.begin(), required.end(), it.key()) != required.end();
      const std::string at = pointer + "/properties/" + pointer_token(it.key());
      if (it.value() == false) {
        if (must) fail(at, "a required property cannot have the schema 'false'");
        continue;
      }
      members.emplace_back(
          regex_escape(dump(Json(it.key()), at)) + ws_ + ":" + ws_ + value(it.value(), at, depth + 1), must);
    }
    return json_object_regex(member_sequence(members), ws_);
  }

  // The members in order, each optional one free to be absent, with a "," between each two present.
  std::string member_sequence(const std::vector<std::pair<std::string, bool>>& members) const {
    const std::string comma = ws_ + "," + ws_;
    // With a required member r: optional members before it carry a comma after them, those after it
    // carry one before them.
    auto first_required =
        std::find_if(members.begin(), members.end(), [](const auto& m) { return m.second; });
    if (first_required != members.end()) {
      std::string out;
      for (auto it = members.begin(); it != first_required; ++it) out += regex_group(it->first + comma) + "?";
      out += first_required->first;
      for (auto it = first_required + 1; it != members.end(); ++it) {
        out += it->second ? comma + it->first : regex_group(comma + it->first) + "?";
      }
      return out;
    }
    // All optional: none, or the first present one is k, each later one optional with a comma before it.
    std::vector<std::string> starts;
    for (size_t k = 0; k < members.size(); ++k) {
      std::string start = members[k].first;
      for (size_t j = k + 1; j < members.size(); ++j) start += regex_group(comma + members[j].first) + "?";
      starts.push_back(start);
    }
    return regex_group(regex_alternation(starts)) + "?";
  }

  std::string any(int depth) const {
    return json_any_value_regex(std::min(kAnyNesting, max_depth_ - depth), ws_);
  }
  // The members of an open array or object, which is itself one of the levels.
  std::string nested_any(int depth) const {
    return json_any_value_regex(std::min(kAnyNesting, max_depth_ - depth) - 1, ws_);
  }
};

}  // namespace

std::string json_schema_to_regex(const nlohmann::json& schema, const JsonSchemaRegexOptions& options) {
  return Converter<nlohmann::json>(schema, options).convert();
}

std::string json_schema_to_regex(const nlohmann::ordered_json& schema,
                                 const JsonSchemaRegexOptions& options) {
  return Converter<nlohmann::ordered_json>(schema, options).convert();
}

}  // namespace tpserve::serve
