// Structured output over HTTP on the tiny random model with Qwen3's tokenizer: whatever the random model
// prefers, the answer is one of guided_choice's strings, matches guided_regex, is in guided_grammar's
// language, or is JSON of the schema (response_format, structured_outputs, guided_json); JSON mode's answer
// is valid JSON as far as it goes; tool_choice "required" or named gives tool calls of the tools' schemas.
// Refusals are 400s naming the field.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/serve/json_value_automaton.h"
#include "runtime/serve/openai_request.h"
#include "runtime/serve/regex_dfa.h"
#include "tests/serve/qwen3_tokenizer.h"
#include "tests/serve/test_server.h"

namespace tpserve::serve::testing {
namespace {

Json completion(const Json& extra, int max_tokens = 24) {
  Json body = {{"prompt", "The answer is"}, {"max_tokens", max_tokens}, {"temperature", 0.9}, {"seed", 7}};
  body.update(extra);
  return body;
}

Json chat(const Json& extra, int max_tokens = 48) {
  Json body = {{"messages", {{{"role", "user"}, {"content", "Give me JSON."}}}},
               {"max_tokens", max_tokens},
               {"temperature", 0.9},
               {"seed", 3},
               {"chat_template_kwargs", {{"enable_thinking", false}}}};
  body.update(extra);
  return body;
}

std::vector<std::string> texts(const Reply& r) {
  EXPECT_EQ(r.status, 200) << r.raw;
  std::vector<std::string> out;
  for (const Json& c : r.body["choices"])
    out.push_back(c.contains("text") ? c["text"].get<std::string>()
                                     : c["message"]["content"].get<std::string>());
  return out;
}

TEST(HttpStructuredOutput, ChoiceAndRegexHoldWhateverTheModelPrefers) {
  TestServer server;
  QWEN3_TOKENIZER_OR_SKIP(tok);
  const std::vector<std::string> choices = {"yes", "no", "maybe so", "Oslo, Norway"};
  const Reply r = post(server, "/v1/completions", completion({{"guided_choice", choices}, {"n", 4}}));
  for (const std::string& text : texts(r))
    EXPECT_NE(std::find(choices.begin(), choices.end(), text), choices.end()) << text;
  for (const Json& c : r.body["choices"]) EXPECT_EQ(c["finish_reason"], "stop");

  const std::string pattern = "[0-9]{3}-[a-z]{2,4}( ok)?";
  for (const Json& rule :
       {Json{{"guided_regex", pattern}}, Json{{"structured_outputs", {{"regex", pattern}}}}}) {
    const Reply g = post(server, "/v1/completions", completion(rule));
    RegexDfa dfa(pattern);
    for (const std::string& text : texts(g)) EXPECT_TRUE(dfa.matches(text)) << text;
    EXPECT_EQ(g.body["choices"][0]["finish_reason"], "stop");
  }
  // Streamed: the deltas add up to one of the choices.
  const Stream s =
      post_stream(server, "/v1/chat/completions", chat({{"guided_choice", choices}, {"stream", true}}));
  EXPECT_TRUE(s.done);
  EXPECT_NE(std::find(choices.begin(), choices.end(), stream_text(s)), choices.end()) << stream_text(s);
}

// An EBNF grammar (guided_grammar, structured_outputs.grammar): every answer is in its language, in
// completions (n = 3), chat and streamed chat.
TEST(HttpStructuredOutput, GrammarAnswersAreInTheLanguage) {
  TestServer server;
  QWEN3_TOKENIZER_OR_SKIP(tok);
  // At most 116 bytes: every answer ends within max_tokens whatever the model prefers.
  const std::string grammar = R"g(root ::= "[" item ("," ws item){0,3} "]"
item ::= atom | "(" pair ")"   # nested twice at most
pair ::= atom " " (atom | "(" atom " " atom ")")
atom ::= number | word
number ::= "-"? [1-9] [0-9]{0,2}
word ::= [a-z]{1,6}
ws ::= " "?)g";
  // The same language as a regular expression: an oracle that shares no code with the grammar's automaton.
  const std::string atom = "(-?[1-9][0-9]{0,2}|[a-z]{1,6})";
  const std::string item = "(" + atom + "|\\(" + atom + " (" + atom + "|\\(" + atom + " " + atom + "\\))\\))";
  RegexDfa check("\\[" + item + "(, ?" + item + "){0,3}\\]");
  auto expect_in = [&](const std::string& text, const std::string& where) {
    EXPECT_TRUE(check.matches(text)) << where << ": '" << text << "'";
  };
  for (const Json& rule :
       {Json{{"guided_grammar", grammar}}, Json{{"structured_outputs", {{"grammar", grammar}}}}}) {
    Json body = completion(rule, 160);
    body["n"] = 3;
    const Reply r = post(server, "/v1/completions", body);
    for (const std::string& text : texts(r)) expect_in(text, "completion");
    for (const Json& c : r.body["choices"]) EXPECT_EQ(c["finish_reason"], "stop") << r.raw;
  }
  const Reply chat_reply = post(server, "/v1/chat/completions", chat({{"guided_grammar", grammar}}, 160));
  for (const std::string& text : texts(chat_reply)) expect_in(text, "chat");
  const Stream s =
      post_stream(server, "/v1/chat/completions", chat({{"guided_grammar", grammar}, {"stream", true}}, 160));
  EXPECT_TRUE(s.done);
  expect_in(stream_text(s), "streamed chat");
}

// tool_choice "required" and a named function: whatever the random model prefers, the answer is tool calls
// of the offered tools with arguments of their schemas, whole and streamed.
TEST(HttpStructuredOutput, ForcedToolCallsFollowTheToolsSchemas) {
  TestServer server;
  QWEN3_TOKENIZER_OR_SKIP(tok);
  const Json tools = Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"enum": ["Oslo", "Rome"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
      "required": ["city", "days"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
      "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]}}}])");
  auto check_weather = [](const Json& call) {
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["function"]["name"], "get_weather");
    const Json args = Json::parse(call["function"]["arguments"].get<std::string>());
    EXPECT_TRUE(args["city"] == "Oslo" || args["city"] == "Rome") << args;
    EXPECT_TRUE(args["days"].is_number_integer() && args["days"] >= 1 && args["days"] <= 7) << args;
  };
  const Json named = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  const Reply r = post(server, "/v1/chat/completions", chat({{"tools", tools}, {"tool_choice", named}}, 96));
  ASSERT_EQ(r.status, 200) << r.raw;
  const Json& message = r.body["choices"][0]["message"];
  ASSERT_EQ(message["tool_calls"].size(), 1u) << r.raw;
  check_weather(message["tool_calls"][0]);
  EXPECT_TRUE(message["content"].is_null()) << r.raw;
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "tool_calls");

  const Reply any = post(server, "/v1/chat/completions",
                         chat({{"tools", tools}, {"tool_choice", "required"}, {"n", 3}}, 160));
  ASSERT_EQ(any.status, 200) << any.raw;
  // A list may go on until max_tokens: such an answer is its text, cut off (content, "length").
  int with_calls = 0;
  for (const Json& choice : any.body["choices"]) {
    const Json& answer = choice["message"];
    if (choice["finish_reason"] == "length") {
      EXPECT_FALSE(answer.contains("tool_calls")) << any.raw;
      EXPECT_TRUE(answer["content"].is_string()) << any.raw;
      continue;
    }
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << any.raw;
    ASSERT_TRUE(answer.contains("tool_calls")) << any.raw;
    ++with_calls;
    for (const Json& call : answer["tool_calls"]) {
      if (call["function"]["name"] == "get_weather") {
        check_weather(call);
      } else {
        EXPECT_EQ(call["function"]["name"], "get_time");
        const Json args = Json::parse(call["function"]["arguments"].get<std::string>());
        EXPECT_TRUE(args["zone"] == "UTC" || args["zone"] == "CET") << args;
      }
    }
  }
  EXPECT_GE(with_calls, 1) << any.raw;  // seeded: the same answers every run
  // Streamed: the call comes whole in one delta.
  const Stream s = post_stream(server, "/v1/chat/completions",
                               chat({{"tools", tools}, {"tool_choice", named}, {"stream", true}}, 96));
  EXPECT_TRUE(s.done);
  int calls = 0;
  for (const Json& chunk : s.events)
    for (const Json& choice : chunk["choices"])
      if (choice.contains("delta") && choice["delta"].contains("tool_calls"))
        for (const Json& call : choice["delta"]["tool_calls"]) check_weather(call), ++calls;
  EXPECT_EQ(calls, 1);
}

TEST(HttpStructuredOutput, SchemaAnswersAreJsonOfTheSchema) {
  TestServer server;
  QWEN3_TOKENIZER_OR_SKIP(tok);
  const Json small_n = {{"type", "object"},
                        {"properties",
                         {{"ok", {{"type", "boolean"}}},
                          {"size", {{"enum", {"S", "M", "L"}}}},
                          {"n", {{"enum", {1, 22, 333}}}}}},
                        {"required", {"ok", "size"}}};
  const std::vector<std::pair<std::string, Json>> requests = {
      {"/v1/chat/completions",
       chat({{"response_format",
              {{"type", "json_schema"}, {"json_schema", {{"name", "s"}, {"schema", small_n}}}}}})},
      {"/v1/completions", completion({{"structured_outputs", {{"json", small_n}}}, {"n", 2}}, 64)},
      {"/v1/completions", completion({{"guided_json", small_n.dump()}}, 64)},
  };
  for (const auto& [path, body] : requests) {
    const Reply r = post(server, path, body);
    for (const std::string& text : texts(r)) {
      const Json v = Json::parse(text, nullptr, false);
      ASSERT_FALSE(v.is_discarded()) << path << ": " << text;
      EXPECT_TRUE(v["ok"].is_boolean()) << text;
      EXPECT_TRUE(v["size"] == "S" || v["size"] == "M" || v["size"] == "L") << text;
      if (v.contains("n")) {
        EXPECT_TRUE(v["n"] == 1 || v["n"] == 22 || v["n"] == 333) << text;
      }
      EXPECT_LE(v.size(), 3u) << text;
    }
    for (const Json& c : r.body["choices"]) EXPECT_EQ(c["finish_reason"], "stop") << path;
  }
}

// Integer bounds hold in the answer: a range of four values the random tiny model would not land in unled.
TEST(HttpStructuredOutput, SchemaIntegerBoundsHold) {
  TestServer server;
  QWEN3_TOKENIZER_OR_SKIP(tok);
  const Json schema = {{"type", "object"},
                       {"properties", {{"age", {{"type", "integer"}, {"minimum", 1000}, {"maximum", 1003}}}}},
                       {"required", {"age"}}};
  const Reply r =
      post(server, "/v1/completions",
           completion({{"guided_json", schema}, {"n", 4}, {"temperature", 1.0}, {"seed", 3}}, 64));
  ASSERT_EQ(r.status, 200) << r.body.dump();
  for (const std::string& text : texts(r)) {
    const Json v = Json::parse(text, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << text;
    ASSERT_TRUE(v["age"].is_number_integer()) << text;
    EXPECT_GE(v["age"].get<int>(), 1000) << text;
    EXPECT_LE(v["age"].get<int>(), 1003) << text;
  }
}

TEST(HttpStructuredOutput, JsonModeAnswersAreJsonAsFarAsTheyGo) {
  TestServer server;
  QWEN3_TOKENIZER_OR_SKIP(tok);
  for (const Json& rule : {Json{{"response_format", {{"type", "json_object"}}}},
                           Json{{"structured_outputs", {{"json_object", true}}}}}) {
    const Reply r = post(server, "/v1/chat/completions", chat(rule, 40));
    const std::string text = texts(r).at(0);
    const size_t first = text.find_first_not_of(" \n\t\r");
    ASSERT_NE(first, std::string::npos) << text;
    EXPECT_EQ(text[first], '{') << text;
    JsonValueAutomaton json;
    JsonValueState s = json.start();
    for (size_t i = 0; i < text.size(); ++i)
      ASSERT_TRUE(json.step(s, static_cast<uint8_t>(text[i]))) << "byte " << i << " of " << text;
    if (r.body["choices"][0]["finish_reason"] == "stop") {
      EXPECT_TRUE(json.accepting(s)) << text;
    } else {
      EXPECT_EQ(r.body["choices"][0]["finish_reason"], "length");
    }
  }
}

void expect_400(const TestServer& server, const std::string& path, const Json& body, const std::string& param,
                const std::string& says) {
  const Reply r = post(server, path, body);
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body["error"]["param"], param) << r.raw;
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find(says), std::string::npos) << r.raw;
}

TEST(HttpStructuredOutput, RulesThatCannotRunAreRefused) {
  TestServer server;
  QWEN3_TOKENIZER_OR_SKIP(tok);
  const std::string c = "/v1/completions";
  expect_400(server, c, completion({{"guided_regex", "a(?=b)"}}), "guided_regex", "(?=");
  expect_400(server, c, completion({{"guided_regex", "[ab]*a[ab]{20}"}}), "guided_regex", "states");
  expect_400(server, c, completion({{"guided_regex", 5}}), "guided_regex", "string");
  expect_400(server, c, completion({{"guided_choice", Json::array()}}), "guided_choice", "non-empty");
  expect_400(server, c, completion({{"guided_choice", {"a", ""}}}), "guided_choice[1]", "non-empty");
  expect_400(server, c, completion({{"guided_grammar", "root ::= \"a\" | root \"b\""}}), "guided_grammar",
             "left-recursive");
  expect_400(server, c, completion({{"structured_outputs", {{"grammar", "x"}}}}),
             "structured_outputs.grammar", "line 1, column 2: expected '::='");
  expect_400(server, c, completion({{"guided_grammar", 3}}), "guided_grammar", "EBNF grammar string");
  expect_400(server, c, completion({{"structured_outputs", {{"structural_tag", "{}"}}}}),
             "structured_outputs.structural_tag", "not supported");
  expect_400(server, c, completion({{"guided_grammar", "root ::= \"a\""}, {"guided_regex", "a"}}),
             "guided_grammar", "only one");
  expect_400(server, c, completion({{"guided_regex", "a"}, {"guided_choice", {"b"}}}), "guided_choice",
             "only one");
  expect_400(server, c, completion({{"guided_json", {{"type", "object"}, {"not", {{"type", "null"}}}}}}),
             "guided_json", "not");
  expect_400(server, c, completion({{"guided_json", "{oops"}}), "guided_json", "JSON schema");
  // A schema in a string is held to the body's nesting limit (its parse and walk recurse).
  std::string deep;
  for (int i = 0; i < 20000; ++i) deep += R"({"anyOf":[)";
  deep += "{}";
  for (int i = 0; i < 20000; ++i) deep += "]}";
  expect_400(server, c, completion({{"guided_json", deep}}), "guided_json", "nested deeper");
  expect_400(server, c, completion({{"guided_regex", "(?:.?){0,5000}"}}), "guided_regex", "too large");
  expect_400(server, "/v1/chat/completions", chat({{"response_format", {{"type", "yaml"}}}}),
             "response_format.type", "json_schema");
  expect_400(server, "/v1/chat/completions", chat({{"response_format", {{"type", "json_schema"}}}}),
             "response_format.json_schema", "required");
  // The server goes on serving.
  const Reply fine = post(server, c, completion({{"guided_choice", {"fine"}}, {"return_token_ids", true}}));
  EXPECT_EQ(fine.body["choices"][0]["text"], "fine") << fine.raw;
}

TEST(HttpStructuredOutput, RulesNeedTheTokenizer) {
  TestServer server({}, false);
  const Reply r = post(server, "/v1/completions", ids_completion(4, {{"guided_regex", "[0-9]+"}}));
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body["error"]["code"], "tokenizer_unavailable") << r.raw;
}

// With the reasoning parsed out (server.reasoning_parser) and the model left to think, the rule starts after
// </think>; with thinking off it starts at once.
TEST(HttpStructuredOutput, ChatRulesStartAfterTheReasoning) {
  QWEN3_TOKENIZER_OR_SKIP(tok);
  RequestLimits limits;
  limits.tokenizer = tok;
  limits.vocab_size = 151936;
  limits.max_context_tokens = 512;
  limits.grammars = std::make_shared<StructuredGrammars>(*tok);
  limits.parse_reasoning = true;
  Json body = chat({{"guided_choice", {"a"}}});
  body.erase("chat_template_kwargs");
  ParsedRequest thinking = parse_chat_request(body.dump(), limits);
  ASSERT_TRUE(thinking.job.structured);
  EXPECT_EQ(thinking.job.structured_begin_after, tok->token_id("</think>"));
  EXPECT_FALSE(
      parse_chat_request(chat({{"guided_choice", {"a"}}}).dump(), limits).job.structured_begin_after);
  limits.parse_reasoning = false;
  EXPECT_FALSE(parse_chat_request(body.dump(), limits).job.structured_begin_after);
}

}  // namespace
}  // namespace tpserve::serve::testing
