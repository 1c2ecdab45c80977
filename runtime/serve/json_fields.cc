#include "runtime/serve/json_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "runtime/serve/api_error.h"

namespace tpserve::serve {
namespace {

std::string format_number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// The value as JSON, cut to a readable length.
std::string brief(const nlohmann::ordered_json& v) {
  std::string text = v.dump();
  return text.size() <= 80 ? text : text.substr(0, 77) + "...";
}

}  // namespace

int json_nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

nlohmann::ordered_json parse_json_body(const std::string& body) {
  if (json_nesting_depth(body) > kMaxJsonDepth)
    throw ApiError(
        400,
        "the request body nests lists and objects deeper than " + std::to_string(kMaxJsonDepth) + " levels",
        "", "invalid_json");
  try {
    return nlohmann::ordered_json::parse(body);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for numbers like 1e400
    throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what(), "", "invalid_json");
  }
}

std::string describe_json(const nlohmann::ordered_json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case nlohmann::json::value_t::string:
      return "a string";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return v.dump();
    case nlohmann::json::value_t::number_float:
      return v.dump();
    case nlohmann::json::value_t::array:
      return "a list";
    case nlohmann::json::value_t::object:
      return "an object";
    default:
      return "an unsupported value";
  }
}

bool json_to_int64(const nlohmann::ordered_json& v, int64_t& out) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    out = static_cast<int64_t>(v.get<uint64_t>());
    return true;
  }
  if (v.is_number_integer()) {
    out = v.get<int64_t>();
    return true;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) return false;
    out = static_cast<int64_t>(d);
    return true;
  }
  return false;
}

JsonFields::JsonFields(const nlohmann::ordered_json& object, std::string path)
    : object_(object), path_(std::move(path)) {
  if (!object_.is_object())
    bad_request(path_, "expected a JSON object, got " + describe_json(object_),
                path_.empty() ? "invalid_request_body" : "invalid_type");
}

const nlohmann::ordered_json* JsonFields::get(const std::string& key) const {
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<bool> JsonFields::boolean(const std::string& key) const {
  const auto* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean())
    bad_request(path(key), "expected true or false, got " + describe_json(*v), "invalid_type");
  return v->get<bool>();
}

std::optional<std::string> JsonFields::string(const std::string& key) const {
  const auto* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) bad_request(path(key), "expected a string, got " + describe_json(*v), "invalid_type");
  return v->get<std::string>();
}

std::optional<double> JsonFields::number(const std::string& key, double lo, double hi, bool lo_open) const {
  const auto* v = get(key);
  if (v == nullptr) return std::nullopt;
  const std::string range =
      std::string(lo_open ? "(" : "[") + format_number(lo) + ", " + format_number(hi) + "]";
  if (!v->is_number())
    bad_request(path(key), "expected a number in " + range + ", got " + describe_json(*v), "invalid_type");
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi || (lo_open && d == lo))
    bad_request(path(key), "must be in " + range + ", got " + v->dump());
  return d;
}

std::optional<int64_t> JsonFields::integer(const std::string& key, int64_t lo, int64_t hi) const {
  const auto* v = get(key);
  if (v == nullptr) return std::nullopt;
  int64_t value = 0;
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!v->is_number())
    bad_request(path(key), "expected an integer in " + range + ", got " + describe_json(*v), "invalid_type");
  if (!json_to_int64(*v, value))
    bad_request(path(key), "expected an integer in " + range + ", got " + v->dump(), "invalid_type");
  if (value < lo || value > hi) bad_request(path(key), "must be in " + range + ", got " + v->dump());
  return value;
}

void JsonFields::refuse_unless_neutral(const std::string& key, const nlohmann::ordered_json& neutral,
                                       const std::string& why) const {
  const auto* v = get(key);
  if (v == nullptr || *v == neutral) return;
  // Numbers compare by value (0 == 0.0).
  if (v->is_number() && neutral.is_number() && v->get<double>() == neutral.get<double>()) return;
  bad_request(path(key), "is not supported by tpserve (" + why + "); got " + brief(*v),
              "unsupported_parameter");
}

}  // namespace tpserve::serve
