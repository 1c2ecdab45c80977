#include "runtime/serve/json_value_regex.h"

namespace tpserve::serve {
namespace {

// A string character: anything but '"', '\' and U+0000..U+001F, or an escape; a \u escape of a surrogate
// only as a high one followed by a low one (strict parsers refuse lone surrogates, as JSON mode does).
constexpr std::string_view kStringChar =
    R"((?:[^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u(?:[0-9a-cA-CefEF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2})|)"
    R"(\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}))";
constexpr std::string_view kInteger = R"(-?(?:0|[1-9][0-9]*))";
constexpr std::string_view kFraction = R"((?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)";

constexpr std::string_view kDate = R"(\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01]))";
// RFC 3339 full-time: the offset is required; second 60 is a leap second.
constexpr std::string_view kTime =
    R"((?:[01]\d|2[0-3]):[0-5]\d:(?:[0-5]\d|60)(?:\.\d+)?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d))";
constexpr std::string_view kUuid =
    R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})";
// A dot-atom local part (RFC 5322, no quoted forms) and a domain of at least two labels.
constexpr std::string_view kEmailAtom = R"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)";
constexpr std::string_view kDomainLabel = R"([A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)";

// A quantifier for min..max repetitions (max < 0: unbounded).
std::string count_suffix(size_t min, long long max) {
  if (max >= 0) return "{" + std::to_string(min) + "," + std::to_string(max) + "}";
  return min > 0 ? "{" + std::to_string(min) + ",}" : "*";
}

}  // namespace

std::string regex_group(const std::string& regex) {
  return "(?:" + regex + ")";
}

std::string regex_alternation(const std::vector<std::string>& alternatives) {
  std::string out;
  size_t kept = 0;
  for (const std::string& a : alternatives) {
    if (a.empty()) continue;
    out += (kept++ == 0 ? "" : "|") + a;
  }
  return kept > 1 ? regex_group(out) : out;
}

std::string regex_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::string_view(R"(\.^$|?*+()[]{})").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

std::string json_string_regex(size_t min, long long max) {
  return "\"" + std::string(kStringChar) + count_suffix(min, max) + "\"";
}

std::string json_integer_regex() {
  return std::string(kInteger);
}
std::string json_number_regex() {
  return std::string(kInteger) + std::string(kFraction);
}
std::string json_boolean_regex() {
  return "(?:true|false)";
}

std::string json_format_regex(std::string_view format) {
  if (format == "date") return std::string(kDate);
  if (format == "time") return std::string(kTime);
  if (format == "date-time") return std::string(kDate) + "T" + std::string(kTime);
  if (format == "uuid") return std::string(kUuid);
  if (format == "email") {
    const std::string atom(kEmailAtom), label(kDomainLabel);
    return atom + R"((?:\.)" + atom + ")*@" + label + R"((?:\.)" + label + ")+";
  }
  return "";
}

std::string json_list_regex(const std::string& member, size_t min, long long max, const std::string& ws) {
  if (max == 0) return "";
  const std::string more = regex_group(ws + "," + ws + member);
  const std::string tail = more + count_suffix(min == 0 ? 0 : min - 1, max > 0 ? max - 1 : -1);
  return min == 0 ? regex_group(member + tail) + "?" : member + tail;
}

std::string json_object_regex(const std::string& members, const std::string& ws) {
  return R"(\{)" + ws + members + ws + R"(\})";
}

std::string json_array_regex(const std::string& item, size_t min, long long max, const std::string& ws) {
  return R"(\[)" + ws + json_list_regex(item, min, max, ws) + ws + R"(\])";
}

std::string json_map_regex(const std::string& value, const std::string& ws) {
  return json_object_regex(json_list_regex(json_string_regex() + ws + ":" + ws + value, 0, -1, ws), ws);
}

std::string json_any_value_regex(int levels, const std::string& ws) {
  const std::string scalar =
      json_string_regex() + "|" + json_number_regex() + "|" + json_boolean_regex() + "|null";
  if (levels <= 0) return regex_group(scalar);
  const std::string inner = json_any_value_regex(levels - 1, ws);
  return regex_group(scalar + "|" + json_array_regex(inner, 0, -1, ws) + "|" + json_map_regex(inner, ws));
}

}  // namespace tpserve::serve
