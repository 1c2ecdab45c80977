// JSON schema -> regex, for structured output (vLLM's guided_json and response_format json_schema): the regex
// (syntax: runtime/serve/regex_parser.h, compiled by RegexDfa) matches JSON texts that conform to the schema,
// written in one canonical layout: object properties in the schema's order, `whitespace` between tokens, keys
// and enum/const values exactly as nlohmann's dump() writes them.
//
// Supported: type (one or a list: string, integer, number, boolean, null, object, array), enum, const,
// anyOf/oneOf (alternation; oneOf's exclusivity is not enforced), allOf of one schema, local $ref
// ("#/$defs/...", "#/definitions/...", any "#/..." pointer; recursive references are refused), properties
// with required (optional properties may be left out; extra properties are never generated), items,
// minItems, maxItems, minLength, maxLength, pattern (the string's characters between its quotes, cut to
// those a JSON string holds unescaped: json_string_pattern.h), format date-time, date, time (RFC 3339, offset
// required), uuid, email (other formats: a plain string), minimum, maximum, exclusiveMinimum,
// exclusiveMaximum (json_number_range.h: integers with any bounds, rounded inward; numbers with any decimal
// bounds, then written without an exponent; bounds beyond the 64-bit range clamped to it). Ignored:
// annotations (title, description, default, ...) and unknown keywords. `{}`, `true`, an object without
// properties and an array without items allow any JSON value nested at most 3 arrays/objects deep (counted
// from where the open schema is).
//
// Refused with tpserve::Error ("json schema: <JSON pointer>: <what>"): keywords that constrain but cannot
// be expressed (not, if/then/else, patternProperties, propertyNames, dependentRequired, dependentSchemas,
// uniqueItems: true, multipleOf, contains, prefixItems, tuple items, unevaluated*, min/maxProperties),
// allOf of several schemas, a combinator ($ref, allOf, anyOf, oneOf, enum, const) beside other
// constraints, nesting deeper than max_depth, schemas whose regex would exceed 1 MiB, bounds that are not
// numbers, and bounds no value meets.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tpserve::serve {

struct JsonSchemaRegexOptions {
  std::string whitespace = R"([ \n\t]{0,2})";  // between tokens (vLLM's guided_whitespace_pattern overrides)
  int max_depth = 32;                          // nesting of objects/arrays/$ref expansion; deeper: error
};

// ordered_json keeps the schema's property order; nlohmann::json has sorted it by key.
std::string json_schema_to_regex(const nlohmann::json& schema, const JsonSchemaRegexOptions& options = {});
std::string json_schema_to_regex(const nlohmann::ordered_json& schema,
                                 const JsonSchemaRegexOptions& options = {});

}  // namespace tpserve::serve
