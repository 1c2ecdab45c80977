#include "runtime/serve/structured_output_fields.h"

#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "runtime/serve/api_error.h"
#include "runtime/serve/json_schema_regex.h"
#include "runtime/serve/json_value_regex.h"
#include "runtime/serve/structured_grammars.h"

namespace tpserve::serve {
namespace {

using Json = nlohmann::ordered_json;

// One rule as the request wrote it, before it is compiled.
struct RuleField {
  enum class Kind { kJsonSchema, kRegex, kChoice, kJsonObject, kGrammar } kind;
  std::string field;  // where the request gave it, for errors
  const Json* value;  // the schema, pattern or choices (kJsonObject: none)
};

// The schema of a json rule: an object, or a string holding one (vLLM takes both).
Json schema_of(const Json& value, const std::string& field) {
  if (value.is_object() || value.is_boolean()) return value;
  if (value.is_string()) {
    // As deep as a request body may be (json_fields.h), or the parse and the schema's walk recurse too far.
    if (json_nesting_depth(value.get<std::string>()) > kMaxJsonDepth)
      bad_request(field, "the schema is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels",
                  "invalid_value");
    Json parsed = Json::parse(value.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean()))
      bad_request(field, "expected a JSON schema (an object, or a string holding one)", "invalid_value");
    return parsed;
  }
  bad_request(field, "expected a JSON schema object, got " + describe_json(value), "invalid_type");
}

std::string choice_regex(const Json& value, const std::string& field) {
  if (!value.is_array() || value.empty())
    bad_request(field, "expected a non-empty list of strings, got " + describe_json(value), "invalid_type");
  std::string pattern;
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string() || value[i].get<std::string>().empty())
      bad_request(field + "[" + std::to_string(i) + "]", "expected a non-empty string", "invalid_value");
    pattern += (i ? "|" : "") + regex_escape(value[i].get<std::string>());
  }
  return regex_group(pattern);
}

std::shared_ptr<StructuredGrammar> compile(const RuleField& rule, const std::string& whitespace,
                                           StructuredGrammars& grammars) {
  try {
    switch (rule.kind) {
      case RuleField::Kind::kJsonObject: {
        // An object (the default), ending with its closing brace: nothing may follow, the request stops
        // there.
        JsonValueOptions options;
        if (whitespace.empty()) options.max_whitespace_run = 0;
        options.trailing_whitespace = false;
        return grammars.json(options);
      }
      case RuleField::Kind::kRegex:
        if (!rule.value->is_string())
          bad_request(rule.field, "expected a regular expression string, got " + describe_json(*rule.value),
                      "invalid_type");
        return grammars.regex(rule.value->get<std::string>());
      case RuleField::Kind::kChoice:
        return grammars.regex(choice_regex(*rule.value, rule.field));
      case RuleField::Kind::kGrammar:
        if (!rule.value->is_string() || rule.value->get<std::string>().empty())
          bad_request(rule.field, "expected an EBNF grammar string, got " + describe_json(*rule.value),
                      "invalid_type");
        return grammars.ebnf(rule.value->get<std::string>());
      case RuleField::Kind::kJsonSchema: {
        JsonSchemaRegexOptions options;
        options.whitespace = whitespace;
        return json_schema_grammar(schema_of(*rule.value, rule.field), rule.field, grammars, options);
      }
    }
  } catch (const Error& e) {  // the rule's own problem, said for the user
    bad_request(rule.field, e.what(), "invalid_value");
  }
  TPS_THROW("unknown structured output kind");
}

}  // namespace

std::shared_ptr<StructuredGrammar> json_schema_grammar(const Json& schema, const std::string& field,
                                                       StructuredGrammars& grammars,
                                                       const JsonSchemaRegexOptions& options) {
  try {
    return grammars.regex(json_schema_to_regex(schema, options));
  } catch (const Error& e) {  // the schema's own problem, said for the user
    bad_request(field, e.what(), "invalid_value");
  }
}

std::shared_ptr<StructuredGrammar> parse_structured_output(const JsonFields& f,
                                                           StructuredGrammars* grammars) {
  std::vector<RuleField> rules;
  std::string whitespace = JsonSchemaRegexOptions{}.whitespace;
  if (const Json* so = f.get("structured_outputs")) {
    const JsonFields s(*so, f.path("structured_outputs"));
    if (s.get("structural_tag"))
      bad_request(s.path("structural_tag"),
                  "structural tags are not supported; use json, regex, choice or grammar",
                  "unsupported_parameter");
    if (const Json* v = s.get("grammar")) rules.push_back({RuleField::Kind::kGrammar, s.path("grammar"), v});
    if (const Json* v = s.get("json")) rules.push_back({RuleField::Kind::kJsonSchema, s.path("json"), v});
    if (const Json* v = s.get("regex")) rules.push_back({RuleField::Kind::kRegex, s.path("regex"), v});
    if (const Json* v = s.get("choice")) rules.push_back({RuleField::Kind::kChoice, s.path("choice"), v});
    if (s.boolean("json_object").value_or(false))
      rules.push_back({RuleField::Kind::kJsonObject, s.path("json_object"), nullptr});
    if (const auto w = s.string("whitespace_pattern")) whitespace = *w;
    if (s.boolean("disable_any_whitespace").value_or(false)) whitespace.clear();
    s.boolean("disable_fallback");               // accepted: there is one backend, and no fallback
    s.boolean("disable_additional_properties");  // accepted: a schema's objects never take other keys
  }
  if (const Json* v = f.get("guided_json")) rules.push_back({RuleField::Kind::kJsonSchema, "guided_json", v});
  if (const Json* v = f.get("guided_regex")) rules.push_back({RuleField::Kind::kRegex, "guided_regex", v});
  if (const Json* v = f.get("guided_choice")) rules.push_back({RuleField::Kind::kChoice, "guided_choice", v});
  if (const Json* v = f.get("guided_grammar"))
    rules.push_back({RuleField::Kind::kGrammar, "guided_grammar", v});
  if (const auto w = f.string("guided_whitespace_pattern")) whitespace = *w;
  f.string("guided_decoding_backend");  // accepted and ignored: there is one
  if (const Json* format = f.get("response_format")) {
    const JsonFields r(*format, "response_format");
    const std::string type = r.string("type").value_or("text");
    if (type == "json_object") {
      rules.push_back({RuleField::Kind::kJsonObject, "response_format", nullptr});
    } else if (type == "json_schema") {
      const Json* spec = r.get("json_schema");
      if (spec == nullptr) bad_request(r.path("json_schema"), "is required", "missing_required_parameter");
      const JsonFields js(*spec, r.path("json_schema"));
      const Json* schema = js.get("schema");
      if (schema == nullptr) bad_request(js.path("schema"), "is required", "missing_required_parameter");
      js.string("name");
      js.string("description");
      js.boolean("strict");
      rules.push_back({RuleField::Kind::kJsonSchema, js.path("schema"), schema});
    } else if (type != "text") {
      bad_request(r.path("type"),
                  "must be \"text\", \"json_object\" or \"json_schema\", got \"" + type + "\"",
                  "unsupported_parameter");
    }
  }
  if (rules.empty()) return nullptr;
  if (rules.size() > 1)
    bad_request(rules[1].field,
                "only one structured output rule may be given (" + rules[0].field + " is one)",
                "invalid_value");
  if (grammars == nullptr)
    bad_request(rules[0].field,
                "structured output needs the server's tokenizer (see model.tokenizer in docs/config.md)",
                "tokenizer_unavailable");
  return compile(rules[0], whitespace, *grammars);
}

}  // namespace tpserve::serve
