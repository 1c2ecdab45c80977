// The request fields that ask for structured output, compiled into a grammar (runtime/serve/
// structured_grammars.h): vLLM's `structured_outputs` {json, regex, choice, grammar, json_object,
// whitespace_pattern, disable_any_whitespace}, its older `guided_json`, `guided_regex`, `guided_choice` and
// `guided_whitespace_pattern`, and OpenAI's `response_format` {"type": "json_object"} or {"type":
// "json_schema", "json_schema": {"name", "schema"}}, and EBNF grammars (`structured_outputs.grammar`,
// `guided_grammar`). At most one rule; structural tags are refused. Every problem throws ApiError naming the
// field.
#pragma once

#include <memory>
#include <string>

#include "runtime/serve/json_fields.h"
#include "runtime/serve/json_schema_regex.h"
#include "runtime/serve/structured_grammar.h"

namespace tpserve::serve {

class StructuredGrammars;

// The rule the request asks for, or nullptr. `grammars` is nullptr on a server without a tokenizer (a rule
// is then refused: it is written over the vocabulary's text).
std::shared_ptr<StructuredGrammar> parse_structured_output(const JsonFields& f, StructuredGrammars* grammars);

// A JSON schema compiled into a grammar (json_schema_to_regex, then StructuredGrammars::regex); a schema it
// cannot take is an ApiError naming `field`. Also the schema of a forced tool choice (runtime/serve/
// openai_request.cc).
std::shared_ptr<StructuredGrammar> json_schema_grammar(const nlohmann::ordered_json& schema,
                                                       const std::string& field, StructuredGrammars& grammars,
                                                       const JsonSchemaRegexOptions& options = {});

}  // namespace tpserve::serve
