// json_schema_to_regex: for each supported keyword, the regex (compiled by RegexDfa) accepts conforming JSON
// texts (written by hand and by nlohmann's dump()) and rejects others; unsupported schemas are refused
// with the JSON pointer of the offending part.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/serve/json_schema_regex.h"
#include "runtime/serve/regex_dfa.h"

namespace tpserve::serve {
namespace {

using Json = nlohmann::ordered_json;

void expect_instances(const std::string& schema, const std::vector<std::string>& valid,
                      const std::vector<std::string>& invalid, const JsonSchemaRegexOptions& options = {}) {
  SCOPED_TRACE("schema " + schema);
  const std::string regex = json_schema_to_regex(Json::parse(schema), options);
  RegexDfa dfa(regex);
  for (const std::string& text : valid)
    EXPECT_TRUE(dfa.matches(text)) << "valid " << text << "\nregex " << regex;
  for (const std::string& text : invalid) {
    EXPECT_FALSE(dfa.matches(text)) << "invalid " << text << "\nregex " << regex;
  }
}

std::string error_of(const Json& schema, const JsonSchemaRegexOptions& options = {}) {
  try {
    json_schema_to_regex(schema, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_refused(const std::string& schema, const std::string& message) {
  const std::string error = error_of(Json::parse(schema));
  EXPECT_NE(error.find(message), std::string::npos) << "schema " << schema << " gave: " << error;
  EXPECT_EQ(error.rfind("json schema: ", 0), 0u) << error;
}

TEST(JsonSchemaRegex, Scalars) {
  expect_instances(R"({"type":"integer"})", {"0", "-5", "1234567890"},
                   {"01", "1.5", "-", "+1", "1e5", "", "\"1\""});
  expect_instances(R"({"type":"number"})", {"0", "-0.5", "1e10", "1.5E-3", "12", "2e+8"},
                   {".5", "1.", "01", "1e", "-", "NaN", "Infinity"});
  expect_instances(R"({"type":"boolean"})", {"true", "false"}, {"True", "1", "null"});
  expect_instances(R"({"type":"null"})", {"null"}, {"", "nil", "\"null\""});
  expect_instances(
      R"({"type":"string"})",
      {R"("")", R"("a b")", R"("\"")", R"("\\")", R"("\u00e9\uD83D\uDE00")", R"("\/\b\f\n\r\t")",
       "\"caf\xC3\xA9 \xF0\x9F\x98\x80\""},
      {R"("a)", R"(a")", R"("\x")", "\"a\nb\"", R"("\u12")", "\"\xC0\x80\"", R"("a"b")", "\"\t\""});
  expect_instances(R"({"type":["integer","null"]})", {"5", "null"}, {"\"5\"", "true"});
  expect_instances(R"({"type":["number","integer"]})", {"5", "5.5"}, {"null"});
}

TEST(JsonSchemaRegex, StringLengthsFormatsAndPatterns) {
  expect_instances(R"({"type":"string","minLength":2,"maxLength":3})",
                   {R"("ab")", R"("a\nc")", "\"\xC3\xA9\xC3\xA9\""}, {R"("a")", R"("abcd")", R"("\u0041")"});
  expect_instances(R"({"type":"string","minLength":1})", {R"("a")", R"("abcdef")"}, {R"("")"});
  expect_instances(R"({"type":"string","format":"date"})", {R"("2024-02-29")", R"("1999-12-31")"},
                   {R"("2024-13-01")", R"("2024-1-01")", R"("24-01-01")", R"("2024-01-32")"});
  expect_instances(R"({"type":"string","format":"time"})", {R"("23:59:59Z")", R"("08:00:00.25+05:30")"},
                   {R"("24:00:00Z")", R"("12:00:00")", R"("12:60:00Z")"});
  expect_instances(R"({"type":"string","format":"date-time"})", {R"("2024-05-01T12:30:00Z")"},
                   {R"("2024-05-01 12:30:00Z")", R"("2024-05-01")"});
  expect_instances(R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"},
                   {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400g")"});
  expect_instances(R"({"type":"string","format":"email"})", {R"("jo.doe+x@mail.example.com")"},
                   {R"("jo@localhost")", R"("@example.com")", R"("jo..doe@example.com")", R"("a b@c.de")"});
  expect_instances(R"({"type":"string","format":"hostname"})", {R"("anything")"}, {"anything"});  // ignored
  expect_instances(R"({"type":"string","pattern":"^[A-Z]{2}-\\d+$"})", {R"("AB-12")"},
                   {R"("AB-")", R"("ab-12")", R"("XAB-12")", "AB-12"});
  expect_instances(R"({"type":"string","pattern":"a|b"})", {R"("a")", R"("b")"}, {R"("ab")", R"(a"|"b)"});
  expect_instances(R"({"type":"string","pattern":"cost\\$"})", {R"("cost$")"}, {R"("cost")"});
}

// Every subset of four properties, for every choice of which are required: an object is accepted exactly
// when it holds all required ones (in schema order, commas only between members).
TEST(JsonSchemaRegex, OptionalAndRequiredPropertiesInEveryCombination) {
  const std::vector<std::string> names = {"a", "b", "c", "d"};
  for (int required = 0; required < 16; ++required) {
    Json schema = {{"type", "object"}, {"properties", Json::object()}, {"required", Json::array()}};
    for (int i = 0; i < 4; ++i) {
      schema["properties"][names[i]] = {{"type", "integer"}};
      if (required & (1 << i)) schema["required"].push_back(names[i]);
    }
    SCOPED_TRACE(schema.dump());
    RegexDfa dfa(json_schema_to_regex(schema));
    for (int present = 0; present < 16; ++present) {
      Json instance = Json::object();
      for (int i = 0; i < 4; ++i) {
        if (present & (1 << i)) instance[names[i]] = i;
      }
      const std::string text = instance.dump();
      EXPECT_EQ(dfa.matches(text), (present & required) == required) << text;
      EXPECT_FALSE(dfa.matches(text.substr(0, text.size() - 1) + ",}")) << text;  // trailing comma
      EXPECT_FALSE(dfa.matches("{," + text.substr(1))) << text;                   // leading comma
    }
    EXPECT_FALSE(dfa.matches(R"({"a":0,,"b":1,"c":2,"d":3})"));
    EXPECT_FALSE(dfa.matches(R"({"a":0,"b":1,"c":2,"d":3,"e":4})"));  // extra property
    EXPECT_FALSE(dfa.matches(R"({"b":1,"a":0,"c":2,"d":3})"));        // not the schema's order
  }
}

TEST(JsonSchemaRegex, NestedObjectsAndArrays) {
  const std::string schema = R"({
    "title": "Order", "description": "ignored", "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
      "id": {"type": "integer", "minimum": 1},
      "customer": {"type": "object", "properties": {"name": {"type": "string"}, "vip": {"type": "boolean"}},
                   "required": ["name"], "additionalProperties": false},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
      "lines": {"type": "array", "minItems": 1,
                "items": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                          "required": ["sku", "qty"]}}
    },
    "required": ["id", "customer", "lines"]
  })";
  Json order = {{"id", 7},
                {"customer", {{"name", "Zo\xC3\xAB"}, {"vip", true}}},
                {"tags", {"a", "b"}},
                {"lines", {{{"sku", "X-1"}, {"qty", 2}}, {{"sku", "Y"}, {"qty", 10}}}}};
  Json no_tags = order;
  no_tags.erase("tags");
  Json too_many_tags = order;
  too_many_tags["tags"] = {"a", "b", "c", "d"};
  Json no_lines = order;
  no_lines["lines"] = Json::array();
  Json wrong_type = order;
  wrong_type["id"] = "7";
  Json missing_name = order;
  missing_name["customer"].erase("name");
  Json extra = order;
  extra["customer"]["age"] = 3;
  Json long_tag = order;
  long_tag["tags"] = {"abcdefghi"};
  expect_instances(
      schema,
      {order.dump(), no_tags.dump(),
       R"({ "id": 1, "customer": {"name": "x"}, "tags": [ ], "lines": [ {"sku": "s", "qty": 0} ] })",
       "{\n\"id\":1,\n\"customer\":{\"name\":\"x\"},\n\"lines\":[{\"sku\":\"s\",\"qty\":0}]\n}"},
      {too_many_tags.dump(), no_lines.dump(), wrong_type.dump(), missing_name.dump(), extra.dump(),
       long_tag.dump(), order.dump().substr(1), order.dump() + " x",
       R"({"id":1,"customer":{"name":"x"},"tags":["a",],"lines":[{"sku":"s","qty":0}]})",
       R"({"id":1,"customer":{"name":"x"},"lines":[{"sku":"s","qty":0}],})",
       "{   \"id\":1,\"customer\":{\"name\":\"x\"},\"lines\":[{\"sku\":\"s\",\"qty\":0}]}"});
}

TEST(JsonSchemaRegex, ArrayCounts) {
  expect_instances(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})",
                   {"[1,2]", "[1, 2, 3]"}, {"[]", "[1]", "[1,2,3,4]", "[1,2,]", "[,1,2]", "[1 2]"});
  expect_instances(R"({"type":"array","items":{"type":"integer"},"minItems":2})", {"[1,2]", "[1,2,3,4,5]"},
                   {"[1]"});
  expect_instances(R"({"type":"array","items":{"type":"integer"},"maxItems":0})", {"[]"}, {"[1]"});
  expect_instances(R"({"type":"array","items":{"type":"null"}})", {"[]", "[null]", "[null,null,null]"},
                   {"[,]"});
  expect_instances(R"({"type":"array","items":false})", {"[]"}, {"[1]"});
}

TEST(JsonSchemaRegex, EnumConstAnyOfAllOfAndRefs) {
  expect_instances(R"({"enum":["red","a.b",3,null,{"k":[1]}]})",
                   {R"("red")", R"("a.b")", "3", "null", R"({"k":[1]})"},
                   {R"("blue")", R"("axb")", "4", R"({"k": [1]})"});
  expect_instances(R"({"type":"string","enum":["x",1]})", {R"("x")"}, {"1"});  // the type filters the values
  expect_instances(R"({"const":"caf\u00e9 \"q\""})", {"\"caf\xC3\xA9 \\\"q\\\"\""}, {R"("cafe")"});
  expect_instances(R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})", {"5", R"("a")"},
                   {R"("ab")", "true"});
  expect_instances(R"({"oneOf":[{"type":"boolean"},{"type":"null"}]})", {"true", "null"}, {"0"});
  expect_instances(R"({"allOf":[{"type":"integer"}],"description":"one"})", {"5"}, {"5.5"});
  // The shape pydantic writes: $defs, $ref, an Optional field as anyOf with null, an enum with its type.
  expect_instances(
      R"({
      "$defs": {
        "Color": {"enum": ["red", "green"], "title": "Color", "type": "string"},
        "Point": {"properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"],
                  "title": "Point", "type": "object"}
      },
      "properties": {
        "color": {"$ref": "#/$defs/Color"},
        "at": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}], "default": null},
        "path": {"type": "array", "items": {"$ref": "#/definitions/Point"}}
      },
      "definitions": {"Point": {"$ref": "#/$defs/Point"}},
      "required": ["color"], "title": "Shape", "type": "object"
    })",
      {R"({"color":"red"})", R"({"color":"green","at":null})", R"({"color":"red","at":{"x":1,"y":-2.5}})",
       R"({"color":"red","path":[{"x":0,"y":0},{"x":1e3,"y":2}]})"},
      {R"({"color":"blue"})", R"({"at":null})", R"({"color":"red","at":{"x":1}})",
       R"({"color":"red","path":[{"y":0,"x":0}]})"});
}

TEST(JsonSchemaRegex, KeysAreEscapedJson) {
  Json schema = {{"type", "object"},
                 {"properties",
                  {{"a.b", {{"type", "integer"}}},
                   {"q\"(", {{"type", "integer"}}},
                   {"caf\xC3\xA9", {{"type", "integer"}}}}},
                 {"required", {"a.b", "q\"(", "caf\xC3\xA9"}}};
  RegexDfa dfa(json_schema_to_regex(schema));
  const Json instance = {{"a.b", 1}, {"q\"(", 2}, {"caf\xC3\xA9", 3}};
  EXPECT_TRUE(dfa.matches(instance.dump()));
  EXPECT_FALSE(dfa.matches(R"({"axb":1,"q\"(":2,"café":3})"));
}

TEST(JsonSchemaRegex, PropertyOrderFollowsTheJsonType) {
  const std::string schema =
      R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"integer"}},"required":["a","b"]})";
  RegexDfa ordered(json_schema_to_regex(Json::parse(schema)));
  EXPECT_TRUE(ordered.matches(R"({"b":1,"a":2})"));
  EXPECT_FALSE(ordered.matches(R"({"a":2,"b":1})"));
  RegexDfa sorted(json_schema_to_regex(nlohmann::json::parse(schema)));  // nlohmann::json sorts keys
  EXPECT_TRUE(sorted.matches(R"({"a":2,"b":1})"));
}

TEST(JsonSchemaRegex, OpenSchemasAllowAnyValueOfBoundedNesting) {
  const std::vector<std::string> values = {"1",       "-2.5e3",
                                           R"("s")",  "true",
                                           "null",    "[]",
                                           "{}",      R"({"a":[1,{"b":null}],"c":"d"})",
                                           "[[[1]]]", R"({"k": {"k": {"k": "v"}}})"};
  const std::vector<std::string> not_values = {"",     "[[[[1]]]]", R"({"a":{"b":{"c":{"d":1}}}})",
                                               "[1,]", "{1:2}",     "nul"};
  expect_instances("{}", values, not_values);
  expect_instances("true", values, not_values);
  expect_instances(R"({"description":"anything"})", values, not_values);
  // Open objects and arrays: their members may nest two more levels.
  expect_instances(R"({"type":"object"})", {"{}", R"({"a":1,"b":[2,{"c":3}]})"}, {"[]", R"({"a":[[[1]]]})"});
  expect_instances(R"({"type":"array"})", {"[]", R"([1,"x",[null]])"}, {"{}"});
  expect_instances(R"({"type":"object","additionalProperties":{"type":"integer"}})",
                   {"{}", R"({"x":1,"y":2})"}, {R"({"x":"1"})"});
  expect_instances(R"({"type":"object","additionalProperties":false})", {"{}", "{ }"}, {R"({"x":1})"});
  // The whole {} automaton stays well within the default state bound.
  RegexDfa dfa(json_schema_to_regex(Json::object()));
  std::vector<int32_t> states = {dfa.start()};
  for (size_t i = 0; i < states.size(); ++i) {
    for (int b = 0; b < 256; ++b) {
      const int32_t to = dfa.next(states[i], static_cast<uint8_t>(b));
      if (to != RegexDfa::kDead && static_cast<size_t>(to) == states.size()) states.push_back(to);
    }
  }
  EXPECT_LT(states.size(), 10000u);
}

TEST(JsonSchemaRegex, WhitespaceOption) {
  JsonSchemaRegexOptions tight;
  tight.whitespace = "";
  expect_instances(R"({"type":"array","items":{"type":"integer"}})", {"[1,2]"}, {"[1, 2]", "[ 1]"}, tight);
  JsonSchemaRegexOptions spaces;
  spaces.whitespace = " *";
  expect_instances(R"({"type":"array","items":{"type":"integer"}})", {"[1,    2]"}, {"[1,\n2]"}, spaces);
  JsonSchemaRegexOptions bad;
  bad.whitespace = "[ ";
  const std::string error = error_of(Json::object(), bad);
  EXPECT_NE(error.find("whitespace pattern: regex: unterminated character class"), std::string::npos)
      << error;
}

TEST(JsonSchemaRegex, UnsupportedSchemasAreRefusedWithTheirPointer) {
  expect_refused(
      R"({"properties":{"tags":{"type":"array","items":{"type":"object","patternProperties":{}}}}})",
      "json schema: /properties/tags/items: unsupported keyword 'patternProperties'");
  for (const char* keyword : {"not", "if", "then", "else", "dependentRequired", "multipleOf", "contains",
                              "prefixItems", "propertyNames", "unevaluatedProperties", "minProperties"}) {
    expect_refused(std::string(R"({"type":"integer",")") + keyword + R"(":{}})",
                   std::string("unsupported keyword '") + keyword + "'");
  }
  expect_refused(R"({"type":"array","uniqueItems":true})", "unsupported keyword 'uniqueItems'");
  expect_instances(R"({"type":"array","items":{"type":"integer"},"uniqueItems":false})", {"[1,1]"}, {});
  expect_refused(R"({"type":"array","items":[{"type":"integer"}]})", "unsupported keyword 'items' (an array");
  expect_refused(R"({"allOf":[{"type":"integer"},{"minimum":1}]})",
                 "/allOf: 'allOf' of more than one schema");
  expect_refused(R"({"anyOf":[{"type":"integer"}],"type":"integer"})",
                 "'type' beside 'anyOf' is not supported");
  expect_refused(R"({"$ref":"#/$defs/A","$defs":{"A":{"type":"integer"}},"maxLength":3})",
                 "'maxLength' beside '$ref'");
  expect_refused(R"({"enum":[1],"const":1})", "beside");
  expect_refused(R"({"$defs":{"Node":{"type":"object","properties":{"next":{"$ref":"#/$defs/Node"}}}},
                    "$ref":"#/$defs/Node"})",
                 "/$defs/Node/properties/next/$ref: recursive reference '#/$defs/Node' is not supported");
  expect_refused(R"({"$ref":"https://example.com/schema.json"})", "/$ref: only local references");
  expect_refused(R"({"$ref":"#/$defs/Missing"})", "/$ref: reference '#/$defs/Missing' does not resolve");
  expect_refused(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["b"]})",
                 R"(/required: required property "b" is not in 'properties')");
  expect_refused(R"({"type":"strin"})", R"(/type: unknown type "strin")");
  expect_refused(R"j({"type":"string","pattern":"a(?=b)"})j", "/pattern: regex: unsupported construct '(?='");
  expect_refused(R"({"type":"string","pattern":"a+","maxLength":3})", "'pattern' with 'minLength'");
  expect_refused(R"({"type":"string","minLength":3,"maxLength":2})", "'maxLength' is less than 'minLength'");
  expect_refused(R"({"type":"array","minItems":3,"maxItems":2})", "'maxItems' is less than 'minItems'");
  expect_refused(R"({"type":"array","minItems":-1})", "/minItems: must be a non-negative integer");
  expect_refused(R"({"enum":[]})", "/enum: must be a non-empty array");
  expect_refused(R"({"properties":{"a":false},"required":["a"]})", "/properties/a: a required property");
  expect_refused("false", "the schema 'false' matches nothing");
  expect_refused("[1]", "a schema must be an object or a boolean");
  JsonSchemaRegexOptions shallow;
  shallow.max_depth = 2;
  const Json deep =
      Json::parse(R"({"type":"array","items":{"type":"array","items":{"type":"array","items":{}}}})");
  EXPECT_NE(error_of(deep, shallow).find("/items/items/items: nested deeper than max_depth (2)"),
            std::string::npos)
      << error_of(deep, shallow);
}

TEST(JsonSchemaRegex, IntegerBounds) {
  expect_instances(R"({"type":"integer","minimum":1,"maximum":5})", {"1", "3", "5"},
                   {"0", "6", "100", "-1", "1.5"});
  // Bounds that are not integers round inward; exclusive ones (numbers, or draft 4's booleans) leave theirs
  // out.
  expect_instances(R"({"type":"integer","minimum":-2.5,"exclusiveMaximum":3})", {"-2", "0", "2"},
                   {"-3", "3"});
  expect_instances(R"({"type":"integer","exclusiveMinimum":2.5,"exclusiveMaximum":5.5})", {"3", "5"},
                   {"2", "6"});
  expect_instances(R"({"type":"integer","exclusiveMinimum":-2.5,"exclusiveMaximum":-0.5})", {"-2", "-1"},
                   {"-3", "0"});
  expect_instances(R"({"type":"integer","exclusiveMinimum":0})", {"1", "12345678901234"}, {"0", "-1"});
  expect_instances(R"({"type":"integer","minimum":0,"exclusiveMinimum":true,"maximum":2})", {"1", "2"},
                   {"0", "3"});
  expect_instances(
      R"({"type":"integer","minimum":0,"exclusiveMinimum":false,"maximum":2,"exclusiveMaximum":true})",
      {"0", "1"}, {"-1", "2"});
  // The stricter of the plain and the exclusive bound, on each side; at equal values the exclusive one.
  expect_instances(R"({"type":"integer","minimum":5,"exclusiveMinimum":3})", {"5", "6"}, {"4"});
  expect_instances(R"({"type":"integer","maximum":5,"exclusiveMaximum":9})", {"5"}, {"6", "8"});
  expect_instances(R"({"type":"integer","maximum":9,"exclusiveMaximum":5})", {"4"}, {"5", "9"});
  expect_instances(R"({"type":"integer","minimum":3,"exclusiveMinimum":3,"maximum":5,"exclusiveMaximum":5})",
                   {"4"}, {"3", "5"});
  expect_instances(R"({"type":["integer","null"],"maximum":-10})", {"-10", "-11", "null"}, {"-9", "0"});
  expect_instances(R"({"type":"integer","minimum":0,"maximum":9223372036854775807})",
                   {"0", "9223372036854775807"}, {"9223372036854775808", "-1"});
  // Beyond the 64-bit range an outer bound is clamped to it (every value written still holds).
  expect_instances(R"({"type":"integer","minimum":0,"maximum":18446744073709551615})",
                   {"0", "9223372036854775807"}, {"9223372036854775808", "-1"});
  expect_instances(R"({"type":"integer","maximum":1e30,"minimum":-1e30})",
                   {"-9223372036854775808", "9223372036854775807"}, {"9223372036854775808"});
  expect_instances(R"({"type":"integer","maximum":9.22e18})", {"9220000000000000000"},
                   {"9220000000000000001"});
}

TEST(JsonSchemaRegex, NumberBounds) {
  expect_instances(R"({"type":"number","minimum":0,"maximum":1})", {"0", "0.5", "0.999", "1", "1.00"},
                   {"1.01", "-0.5", "2", "1e-3", "0.5e1"});
  expect_instances(R"({"type":"number","exclusiveMinimum":-1,"exclusiveMaximum":1})", {"-0.5", "0", "0.999"},
                   {"-1", "-1.0", "1", "1.0"});
  expect_instances(R"({"type":["integer","number"],"minimum":2})", {"2", "2.5"}, {"1.5"});
  // Decimal bounds, also as JSON writes small and large ones (1e-05, 1.5e+20 clamped to the 64-bit range).
  expect_instances(R"({"type":"number","minimum":0.01,"maximum":99.99})", {"0.01", "0.5", "99.99", "50"},
                   {"0.009", "0", "99.991", "100"});
  expect_instances(R"({"type":"number","exclusiveMinimum":0.00001})", {"0.00002", "1"}, {"0.00001", "0"});
  expect_instances(R"({"type":"number","minimum":-0.5,"exclusiveMaximum":-0.25})", {"-0.5", "-0.3"},
                   {"-0.25", "-0.51", "0"});
  // The smallest 64-bit integer as a number's bound, written exactly or beyond it (then clamped).
  expect_instances(R"({"type":"number","maximum":-9223372036854775808})", {"-9223372036854775808"},
                   {"5", "-9223372036854775807"});
  expect_instances(R"({"type":"number","minimum":-1e30,"maximum":0})", {"-9223372036854775808", "0"},
                   {"-99999999999999999999999999999999999", "1"});
  expect_instances(R"({"type":"number","maximum":1e30})", {"9223372036854775806.5", "9223372036854775807"},
                   {"9223372036854775807.5", "9223372036854775808"});
  // Without a type, number keywords with numbers make the value a number; draft 4's booleans alone do not.
  expect_instances(R"({"minimum":3})", {"3", "3.5", "1000"}, {"2.999", R"("x")", "null"});
  expect_instances(R"({"exclusiveMinimum":false})", {"1", R"("x")", "null"}, {});
  expect_instances(R"({"type":"number"})", {"1e300"}, {});  // unbounded numbers keep their exponent
}

TEST(JsonSchemaRegex, BoundsThatCannotBeMetOrWrittenAreRefused) {
  expect_refused(R"({"type":"integer","minimum":5,"maximum":4})", "no integer lies between 5 and 4");
  expect_refused(R"({"type":"integer","minimum":0.2,"maximum":0.8})", "no integer lies between 1 and 0");
  expect_refused(R"({"type":"number","exclusiveMinimum":1,"maximum":1})", "no number lies in the range");
  expect_refused(R"({"type":"number","minimum":0.5,"maximum":0.25})", "no number lies in the range >= 0.5");
  expect_refused(R"({"type":"number","minimum":1e-300})", "a bound with more than 32 digits after the");
  expect_instances(R"({"type":"number","exclusiveMinimum":1e-32})", {"0.1"}, {"0"});
  expect_refused(R"({"type":"integer","minimum":1e30})", "lower bound beyond the 64-bit integer range");
  expect_refused(R"({"type":"integer","exclusiveMinimum":9223372036854775807})",
                 "lower bound beyond the 64-bit");
  expect_refused(R"({"type":"integer","maximum":-1e30})", "upper bound beyond the 64-bit integer range");
  expect_refused(R"({"type":"integer","minimum":"1"})", "/minimum: must be a number");
  expect_refused(R"({"properties":{"n":{"type":"integer","minimum":2,"maximum":1}}})", "/properties/n");
}

// A pattern's sets are cut to what a JSON string holds unescaped: `.` or `[^@]` cannot write a bare quote,
// backslash or control character; a pattern that needs one is refused.
TEST(JsonSchemaRegex, PatternsNeverAdmitBrokenJson) {
  RegexDfa any(json_schema_to_regex(nlohmann::json{{"type", "string"}, {"pattern", "^.*$"}}));
  EXPECT_TRUE(any.matches(R"("ab c")"));
  EXPECT_TRUE(any.matches("\"\xC3\xA9\""));
  EXPECT_FALSE(any.matches(R"("a"b")"));
  EXPECT_FALSE(any.matches("\"a\\b\""));
  EXPECT_FALSE(any.matches("\"a\tb\""));
  RegexDfa email(json_schema_to_regex(nlohmann::json{{"type", "string"}, {"pattern", "^[^@]+@[^@]+$"}}));
  EXPECT_TRUE(email.matches(R"("a@b")"));
  EXPECT_FALSE(email.matches(R"("a"@b")"));
  RegexDfa spaced(json_schema_to_regex(nlohmann::json{{"type", "string"}, {"pattern", "a\\sb"}}));
  EXPECT_TRUE(spaced.matches(R"("a b")"));
  EXPECT_FALSE(spaced.matches("\"a\tb\""));
  RegexDfa astral(json_schema_to_regex(nlohmann::json{{"type", "string"}, {"pattern", "^x.$"}}));
  EXPECT_TRUE(astral.matches("\"x\xF0\x9F\x98\x80\""));
  for (const char* needs_escape : {"\\n", "\\\\", "\""}) {
    try {
      json_schema_to_regex(nlohmann::json{{"type", "string"}, {"pattern", needs_escape}});
      ADD_FAILURE() << needs_escape << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("/pattern"), std::string::npos) << e.what();
    }
  }
}

// The restricted pattern groups only where it must: a pattern nested near the parser's limit still fits.
TEST(JsonSchemaRegex, DeepPatternsStayWithinTheParsersNesting) {
  std::string pattern;
  for (int i = 0; i < 150; ++i) pattern += "(a";
  for (int i = 0; i < 150; ++i) pattern += ")*";
  RegexDfa dfa(json_schema_to_regex(nlohmann::json{{"type", "string"}, {"pattern", pattern}}));
  EXPECT_TRUE(dfa.matches(R"("aaa")"));
  EXPECT_FALSE(dfa.matches(R"("ab")"));
}

TEST(JsonSchemaRegex, StringEscapesOfSurrogatesComeInPairs) {
  RegexDfa text(json_schema_to_regex(nlohmann::json{{"type", "string"}}));
  EXPECT_TRUE(text.matches(R"("\uD83D\uDE00")"));
  EXPECT_TRUE(text.matches(R"("\u00e9\uFFFF\ud7ff")"));
  EXPECT_FALSE(text.matches(R"("\uD800")"));
  EXPECT_FALSE(text.matches(R"("\uDC00x")"));
  EXPECT_FALSE(text.matches(R"("\uD83Dx")"));
}

}  // namespace
}  // namespace tpserve::serve
