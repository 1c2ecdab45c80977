// Malformed and out-of-range requests: each gets the right status and an OpenAI error body naming the
// field (or the route), and the server keeps serving (/health and a good request afterwards).
#include <gtest/gtest.h>

#include "runtime/serve/api_error.h"
#include "runtime/serve/json_fields.h"
#include "tests/serve/raw_socket.h"
#include "tests/serve/test_server.h"

namespace tpserve::serve::testing {
namespace {

struct Case {
  std::string method, path, body;
  int status;
  std::string param;  // the error's param; "" = none expected (null)
  std::string message_contains = "";
};

const std::string kC = "/v1/completions";
const std::string kChat = "/v1/chat/completions";

// A valid completion body with one field replaced (or added).
std::string completion_with(const std::string& field, const std::string& value_json) {
  Json body = {{"prompt", "Hi"}, {"max_tokens", 4}};
  body[field] = Json::parse(value_json);
  return body.dump();
}
std::string chat_with(const std::string& field, const std::string& value_json) {
  Json body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 4}};
  body[field] = Json::parse(value_json);
  return body.dump();
}
std::string chat_messages(const std::string& messages_json) {
  return R"({"max_tokens": 4, "messages": )" + messages_json + "}";
}

std::vector<Case> cases() {
  std::vector<Case> c;
  auto bad = [&](const std::string& path, const std::string& body, const std::string& param, int status = 400,
                 const std::string& contains = "") {
    c.push_back({"POST", path, body, status, param, contains});
  };
  auto field = [&](const std::string& name, const std::string& value, const std::string& param = "") {
    bad(kC, completion_with(name, value), param.empty() ? name : param);
  };
  auto chat_field = [&](const std::string& name, const std::string& value, const std::string& param = "") {
    bad(kChat, chat_with(name, value), param.empty() ? name : param);
  };

  // Bodies that are not a JSON object.
  for (const std::string& path : {kC, kChat}) {
    bad(path, "", "", 400, "not valid JSON");
    bad(path, "{", "", 400, "not valid JSON");
    bad(path, "{\"prompt\": }", "", 400, "not valid JSON");
    bad(path, "[1, 2]", "", 400, "JSON object");
    bad(path, "\"prompt\"", "", 400, "JSON object");
    bad(path, "null", "", 400, "JSON object");
    bad(path, "{\"prompt\": \"a\"} trailing", "", 400, "not valid JSON");
    bad(path, "{\"prompt\": \"\xff\"}", "", 400, "not valid JSON");
    // Numbers beyond a double, and deep nesting, in fields the server reads and in ones it ignores (what
    // recurses over a value overflowed the stack from about 200,000 levels, a 400 KB body: a crash; the
    // test server takes 64 KB bodies).
    bad(path, R"({"prompt": "hi", "max_tokens": 1e400})", "", 400, "not valid JSON");
    bad(path, R"({"zzz": -1e999})", "", 400, "not valid JSON");
    const std::string deep = std::string(20000, '[') + std::string(20000, ']');
    bad(path, R"({"prompt": "hi", "logit_bias": {"1": )" + deep + "}}", "", 400, "deeper than 256 levels");
    bad(path,
        R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": )"
        R"({"name": "f", "parameters": )" +
            deep + "}}]}",
        "", 400, "deeper than 256 levels");
    bad(path, "{\"zzz\": " + std::string(257, '[') + std::string(257, ']') + "}", "", 400, "deeper than");
  }
  // prompt
  bad(kC, R"({"max_tokens": 4})", "prompt");
  field("prompt", "5");
  field("prompt", "true");
  field("prompt", "{}");
  field("prompt", "[]");
  field("prompt", "\"\"");
  field("prompt", "[[]]", "prompt[0]");
  field("prompt", R"(["a", ""])", "prompt[1]");
  field("prompt", R"([[1], []])", "prompt[1]");
  field("prompt", R"([[1], 2])", "prompt[1]");
  field("prompt", R"(["a", [1, 2]])", "prompt[1]");  // strings and id lists do not mix
  field("prompt", R"([[1], "a"])", "prompt[1]");
  field("prompt", R"([[1], [1, -1]])", "prompt[1][1]");
  // 17 prompts x n = 16 choices: more places than the queue's 256.
  bad(kC, Json({{"prompt", std::vector<std::vector<int>>(17, {1})}, {"n", 16}, {"max_tokens", 4}}).dump(),
      "prompt");
  bad(kC, Json({{"prompt", std::vector<std::string>(1025, "a")}, {"max_tokens", 4}}).dump(), "prompt");
  field("prompt", "[1, -1]", "prompt[1]");
  field("prompt", "[1, 151936]", "prompt[1]");
  field("prompt", "[1, 2.5]", "prompt[1]");
  field("prompt", R"([1, "a"])", "prompt[1]");
  field("prompt", "[[1, null]]", "prompt[0][1]");
  // Sampling parameters: types and bounds.
  for (const char* v : {"-0.1", "2.01", "1e9", "\"hot\"", "true", "[]"}) field("temperature", v);
  for (const char* v : {"0", "-0.5", "1.5", "\"x\"", "{}"}) field("top_p", v);
  for (const char* v : {"-2", "-100", "1.5", "\"5\"", "false"}) field("top_k", v);
  for (const char* v : {"-0.01", "1.01", "\"0.1\""}) field("min_p", v);
  for (const char* v : {"1.5", "\"42\"", "9223372036854775808", "true"}) field("seed", v);
  for (const char* v : {"0", "-5", "1.5", "\"10\"", "[]", "2147483648"}) field("max_tokens", v);
  for (const char* v : {"17", "0", "\"1\"", "1.5"}) field("n", v);
  // stop / stop_token_ids / flags
  field("stop", "\"\"");
  field("stop", "5");
  field("stop", "{}");
  field("stop", R"(["ok", ""])", "stop[1]");
  field("stop", R"(["ok", 3])", "stop[1]");
  field("stop_token_ids", "5");
  field("stop_token_ids", "[-1]", "stop_token_ids[0]");
  field("stop_token_ids", "[999999]", "stop_token_ids[0]");
  field("stop_token_ids", R"(["a"])", "stop_token_ids[0]");
  for (const char* name : {"ignore_eos", "skip_special_tokens", "return_token_ids", "stream", "echo"})
    field(name, "\"yes\"");
  field("stream", "1");
  bad(kC, completion_with("stream_options", R"({"include_usage": true})"), "stream_options");
  bad(kC, R"({"prompt": "Hi", "stream": true, "stream_options": 5})", "stream_options");
  bad(kC, R"({"prompt": "Hi", "stream": true, "stream_options": {"include_usage": "yes"}})",
      "stream_options.include_usage");
  // Penalties, logit_bias and min_tokens: types, bounds, keys.
  for (const char* v : {"3", "-2.5", "\"1\"", "[]"}) field("presence_penalty", v);
  for (const char* v : {"-2.5", "2.01", "true"}) field("frequency_penalty", v);
  for (const char* v : {"0", "-1", "1e-39", "2e6", "\"1.1\""}) field("repetition_penalty", v);
  field("logit_bias", "[1]");
  field("logit_bias", "5");
  field("logit_bias", R"({"abc": 5})", "logit_bias.abc");
  field("logit_bias", R"({"-1": 5})", "logit_bias.-1");
  field("logit_bias", R"({"1.5": 5})", "logit_bias.1.5");
  field("logit_bias", R"({"151936": 5})", "logit_bias.151936");
  field("logit_bias", R"({"99999999999": 5})", "logit_bias.99999999999");
  field("logit_bias", R"({"5": 100.5})", "logit_bias.5");
  field("logit_bias", R"({"5": "up"})", "logit_bias.5");
  field("logit_bias", R"({"5": null})", "logit_bias.5");
  field("logit_bias", R"({"5": 1, "05": 2})", "logit_bias.5");  // the test dumps keys sorted: "05" first
  {
    Json many = Json::object();
    for (int t = 0; t < 1025; ++t) many[std::to_string(t)] = 1;
    field("logit_bias", many.dump());
  }
  for (const char* v : {"-1", "\"3\"", "1.5", "5"}) field("min_tokens", v);  // 5 > max_tokens 4
  bad(kC, R"({"prompt": "Hi", "min_tokens": 600})", "min_tokens");           // more than the room left
  // Fields tpserve refuses rather than ignoring.
  field("logprobs", "21");
  field("logprobs", "-1");
  field("logprobs", "true");
  bad(kC, Json({{"prompt", "Hi"}, {"echo", true}, {"logprobs", 1}}).dump(), "echo");  // prompt logprobs
  chat_field("echo", "true");
  field("best_of", "2");
  field("best_of", "0");
  field("suffix", "\"end\"");
  field("user", "5");
  // model
  c.push_back({"POST", kC, completion_with("model", "\"gpt-4\""), 404, "model"});
  field("model", "5");
  // Context length.
  field("max_tokens", "600");
  bad(kC, Json({{"prompt", std::vector<int>(600, 100)}, {"max_tokens", 1}}).dump(), "prompt");

  // Chat: messages and their fields.
  bad(kChat, R"({"max_tokens": 4})", "messages");
  bad(kChat, chat_messages("[]"), "messages");
  bad(kChat, chat_messages("\"hi\""), "messages");
  bad(kChat, chat_messages("[5]"), "messages[0]");
  bad(kChat, chat_messages(R"([{"content": "hi"}])"), "messages[0].role");
  bad(kChat, chat_messages(R"([{"role": "wizard", "content": "hi"}])"), "messages[0].role");
  bad(kChat, chat_messages(R"([{"role": 5, "content": "hi"}])"), "messages[0].role");
  bad(kChat, chat_messages(R"([{"role": "user"}])"), "messages[0].content");
  bad(kChat, chat_messages(R"([{"role": "user", "content": 5}])"), "messages[0].content");
  bad(kChat, chat_messages(R"([{"role": "user", "content": "a"}, {"role": "system", "content": {}}])"),
      "messages[1].content");
  bad(kChat, chat_messages(R"([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}])"),
      "messages[0].content[0].type");
  bad(kChat, chat_messages(R"([{"role": "user", "content": [{"type": "text"}]}])"),
      "messages[0].content[0].text");
  bad(kChat, chat_messages(R"([{"role": "user", "content": [5]}])"), "messages[0].content[0]");
  bad(kChat, chat_messages(R"([{"role": "assistant", "content": "a", "tool_calls": [{"function": {}}]}])"),
      "messages[0].tool_calls[0].function.name");
  bad(kChat, chat_messages(R"([{"role": "assistant", "content": "a", "tool_calls": 3}])"),
      "messages[0].tool_calls");
  bad(kChat, chat_messages(R"([{"role": "assistant", "content": "a", "reasoning_content": 1}])"),
      "messages[0].reasoning_content");
  chat_field("max_completion_tokens", "0");
  chat_field("max_completion_tokens", "\"8\"");
  chat_field("max_completion_tokens", "1000");
  chat_field("temperature", "3");
  chat_field("top_k", "-3");
  chat_field("n", "100");
  chat_field("logprobs", "1");
  chat_field("top_logprobs", "5");  // without logprobs: true
  bad(kChat,
      chat_messages(R"([{"role": "user", "content": "hi"}])")
          .insert(1, R"("logprobs": true, "top_logprobs": 21, )"),
      "top_logprobs");
  chat_field("tools", "{}");
  chat_field("tools", R"([{"type": "retrieval"}])", "tools[0].type");
  chat_field("tools", R"([{"type": "function"}])", "tools[0].function");
  chat_field("tool_choice", "\"required\"");  // without tools
  chat_field("tool_choice", "\"sometimes\"");
  chat_field("tool_choice", "5");
  chat_field("tool_choice", R"({"type": "function"})", "tool_choice.function");
  chat_field("tool_choice", R"({"type": "web", "function": {"name": "f"}})", "tool_choice.type");
  chat_field("tool_choice", R"({"type": "function", "function": {"name": "nope"}})",
             "tool_choice.function.name");
  chat_field("response_format", R"({"type": "json_yaml"})", "response_format.type");
  chat_field("chat_template_kwargs", "5");
  chat_field("chat_template_kwargs", R"({"enable_thinking": "no"})", "chat_template_kwargs.enable_thinking");
  chat_field("add_generation_prompt", "1");
  chat_field("continue_final_message", "true");
  chat_field("chat_template", "\"{{ messages }}\"");
  chat_field("stop", R"([""])", "stop[0]");
  c.push_back({"POST", kChat, chat_with("model", "\"other\""), 404, "model"});

  // Routes and methods.
  for (const std::string& path : {kC, kChat}) {
    c.push_back({"GET", path, "", 405, ""});
    c.push_back({"PUT", path, "{}", 405, ""});
    c.push_back({"DELETE", path, "", 405, ""});
  }
  c.push_back({"POST", "/health", "{}", 405, ""});
  c.push_back({"POST", "/v1/models", "{}", 405, ""});
  c.push_back({"PATCH", "/metrics", "{}", 405, ""});
  c.push_back({"GET", "/v1/nothing", "", 404, ""});
  c.push_back({"POST", "/v1/embeddings", "{}", 404, ""});
  c.push_back({"GET", "/", "", 404, ""});
  c.push_back({"OPTIONS", "/v2/completions", "", 404, ""});
  return c;
}

// A tokenizer larger than the model's vocabulary: text whose ids the model has no embedding for is a 400
// (they became zero embeddings before), token ids within it are served.
TEST(HttpValidation, TextBeyondTheModelsVocabularyIsRefused) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server({"model.synthetic.vocab=256"});
  const Reply r = post(server, "/v1/completions", Json{{"prompt", "Hello world"}, {"max_tokens", 2}});
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body["error"]["param"], "prompt") << r.raw;
  EXPECT_NE(r.raw.find("beyond the model's vocabulary of 256 tokens"), std::string::npos) << r.raw;
  const Reply chat =
      post(server, "/v1/chat/completions", Json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}});
  EXPECT_EQ(chat.status, 400) << chat.raw;
  EXPECT_EQ(post(server, "/v1/completions", Json{{"prompt", {1, 2, 3}}, {"max_tokens", 2}}).status, 200);
}

TEST(HttpValidation, JsonNestingDepthSkipsStrings) {
  EXPECT_EQ(json_nesting_depth(R"({"a": 1})"), 1);
  EXPECT_EQ(json_nesting_depth(R"({"a": [[1], {"b": [2]}]})"), 4);
  EXPECT_EQ(json_nesting_depth(R"({"a": "[[[{{{", "b": "\"[[["})"), 1);  // inside strings, escaped quotes
  EXPECT_EQ(json_nesting_depth("[[[}}}[["), 3);                          // not JSON: still a bound
  EXPECT_EQ(json_nesting_depth(""), 0);
  // At the limit a body parses; one level more is refused.
  const std::string at_limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parse_json_body(at_limit).is_array());
  EXPECT_THROW(parse_json_body("[" + at_limit + "]"), ApiError);
}

TEST(HttpValidation, MalformedRequestsGetAnErrorNamingTheField) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server({"server.max_body_bytes=65536"});
  const std::vector<Case> all = cases();
  ASSERT_GE(all.size(), 100u);
  for (const Case& c : all) {
    SCOPED_TRACE(c.method + " " + c.path + " " + c.body.substr(0, 200));
    const Reply r = send(server, c.method, c.path, c.body);
    EXPECT_EQ(r.status, c.status) << r.raw;
    ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << r.raw;
    const Json& e = r.body["error"];
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty());
    EXPECT_TRUE(e["type"].is_string());
    EXPECT_TRUE(e.contains("code"));
    if (c.param.empty()) {
      EXPECT_TRUE(e["param"].is_null()) << r.raw;
    } else {
      EXPECT_EQ(e["param"], c.param) << r.raw;
      EXPECT_NE(e["message"].get<std::string>().find(c.param), std::string::npos) << r.raw;
    }
    if (!c.message_contains.empty()) {
      EXPECT_NE(e["message"].get<std::string>().find(c.message_contains), std::string::npos) << r.raw;
    }
  }
  // A body over the limit: 413 with a JSON error.
  const Reply big = send(server, "POST", kC, completion_with("prompt", Json(std::string(70000, 'a')).dump()));
  EXPECT_EQ(big.status, 413) << big.raw;
  EXPECT_EQ(big.body["error"]["code"], "request_too_large");

  // Still serving.
  EXPECT_EQ(send(server, "GET", "/health").status, 200);
  const Reply ok = post(server, kC, {{"prompt", "Hi"}, {"max_tokens", 4}, {"temperature", 0}});
  EXPECT_EQ(ok.status, 200) << ok.raw;
  std::cout << "checked " << all.size() + 1 << " malformed requests\n";
}

// Bodies are JSON: application/json (with parameters, any case) or no Content-Type are read; a form encoding
// (curl -d's default) or another type gets a 415 before the body is read, at any size (httplib refused form
// bodies beyond 8 KiB with a 413 that quoted server.max_body_bytes).
TEST(HttpValidation, BodiesOtherThanJsonGet415) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server;
  const std::string body = Json{{"prompt", "Hi"}, {"max_tokens", 2}, {"temperature", 0}}.dump();
  const std::string padded =
      Json{{"prompt", "Hi"}, {"max_tokens", 2}, {"user", std::string(9000, 'u')}}.dump();
  for (const std::string type : {"application/x-www-form-urlencoded", "text/plain", "multipart/form-data"}) {
    for (const std::string& b : {body, padded}) {
      const Reply r = send(server, "POST", kC, b, type);
      EXPECT_EQ(r.status, 415) << type << ": " << r.raw;
      EXPECT_EQ(r.body["error"]["code"], "unsupported_media_type") << r.raw;
      EXPECT_NE(r.body["error"]["message"].get<std::string>().find(type), std::string::npos) << r.raw;
    }
  }
  EXPECT_EQ(send(server, "POST", "/tokenize", R"({"prompt": "Hi"})", "text/plain").status, 415);
  for (const std::string type : {"application/json; charset=utf-8", "Application/JSON"})
    EXPECT_EQ(send(server, "POST", kC, padded, type).status, 200) << type;
  // Without a Content-Type (httplib's client always sends one).
  RawSocket raw(server.port());
  ASSERT_TRUE(
      raw.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body));
  const std::string answer = raw.read_until_closed(std::chrono::seconds(30));
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_EQ(send(server, "POST", "/v1/nothing", body, "text/plain").status, 404);  // no route first
  // A large body sent whole without waiting (no Expect: 100-continue): the 415 arrives, rather than a reset
  // from closing with the body unread.
  const std::string large(4 << 20, 'x');
  RawSocket big(server.port());
  const bool sent = big.send(
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
      "Content-Length: " +
      std::to_string(large.size()) + "\r\n\r\n" + large);
  const std::string refused = big.read_until_closed(std::chrono::seconds(30));
  EXPECT_TRUE(sent);
  EXPECT_EQ(refused.rfind("HTTP/1.1 415", 0), 0u) << refused.substr(0, 200);
}

TEST(HttpValidation, UnknownFieldsAreIgnoredAndNeutralValuesAccepted) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server;
  const Json completion = {{"prompt", "Hi"},
                           {"max_tokens", 3},
                           {"temperature", 0},
                           {"unknown_field", {1, 2}},
                           {"n", 1},
                           {"best_of", 1},
                           {"echo", false},
                           {"logprobs", nullptr},
                           {"presence_penalty", 0},
                           {"frequency_penalty", 0.0},
                           {"logit_bias", Json::object()},
                           {"top_k", -1},
                           {"user", "me"},
                           {"stop", nullptr},
                           {"seed", -5}};
  EXPECT_EQ(post(server, kC, completion).status, 200);
  const Json chat = {
      {"messages",
       {{{"role", "developer"}, {"content", "sys"}},
        {{"role", "user"},
         {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls", {{{"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}}}}},
        {{"role", "tool"}, {"content", "result"}, {"tool_call_id", "x"}}}},
      {"max_tokens", 3},
      {"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", Json::object()}}}}}},
      {"tool_choice", "auto"},
      {"response_format", {{"type", "text"}}},
      {"logprobs", false},
      {"top_logprobs", 0},  // neutral without logprobs (clients send it by default)
      {"parallel_tool_calls", true},
      {"something_new", "ignored"}};
  const Reply r = post(server, kChat, chat);
  EXPECT_EQ(r.status, 200) << r.raw;
}

}  // namespace
}  // namespace tpserve::serve::testing
