// Regexes of JSON values, the pieces json_schema_to_regex puts together: scalars, string formats, lists
// separated by commas, any value of bounded nesting, and escaping of literal text. The syntax is
// runtime/serve/regex_parser.h's; `ws` is the whitespace regex allowed between tokens (already grouped).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tpserve::serve {

// "(?:" + regex + ")".
std::string regex_group(const std::string& regex);

// The alternatives joined by '|' and grouped (one stands alone); empty strings among them (no regex: nothing
// qualifies) are left out, and "" is returned where none is left.
std::string regex_alternation(const std::vector<std::string>& alternatives);

// The regex matching exactly `text` (metacharacters escaped).
std::string regex_escape(std::string_view text);

// A JSON string of min..max characters (max -1: unbounded); an escape counts as one character.
std::string json_string_regex(size_t min = 0, long long max = -1);
std::string json_integer_regex();
std::string json_number_regex();
std::string json_boolean_regex();

// The content between the quotes of a string of a JSON-schema format (date-time, date, time, uuid, email);
// empty for other formats.
std::string json_format_regex(std::string_view format);

// min..max (max -1: unbounded) members separated by ws "," ws.
std::string json_list_regex(const std::string& member, size_t min, long long max, const std::string& ws);

// A JSON object of the given members (a list regex, or a member sequence) with its braces.
std::string json_object_regex(const std::string& members, const std::string& ws);
// [ ws items ws ], min..max items (max < 0: unbounded).
std::string json_array_regex(const std::string& item, size_t min, long long max, const std::string& ws);
// An object of any string keys, each with a value matching `value`.
std::string json_map_regex(const std::string& value, const std::string& ws);

// Any JSON value with at most `levels` arrays/objects nested in it (scalars only for levels <= 0).
std::string json_any_value_regex(int levels, const std::string& ws);

}  // namespace tpserve::serve
