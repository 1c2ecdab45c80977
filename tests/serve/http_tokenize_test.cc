// POST /tokenize and /detokenize: round trips over the real Qwen3 tokenizer's golden corpus (the ids equal
// tokenizers.js's, the text comes back NFC-normalized), chat messages rendered by the template (the count
// equals a chat completion's prompt_tokens), special tokens, and every malformed request a 400 (404, 405)
// naming the field, with the server still serving.
#include <gtest/gtest.h>

#include "runtime/serve/chat_template.h"
#include "tests/serve/test_server.h"

namespace tpserve::serve::testing {
namespace {

TEST(HttpTokenize, RoundTripsOnTheGoldenCorpus) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server;
  const Json golden = read_fixture("tokenizer/qwen3_tokenizer_golden.json");
  ASSERT_GE(golden["cases"].size(), 40u);
  for (const Json& c : golden["cases"]) {
    const std::string text = c["text"];
    SCOPED_TRACE("text: " + text);
    const Reply t = post(server, "/tokenize", {{"prompt", text}});
    ASSERT_EQ(t.status, 200) << t.raw;
    EXPECT_EQ(t.body["tokens"], c["ids"]);
    EXPECT_EQ(t.body["count"], c["ids"].size());
    EXPECT_EQ(t.body["max_model_len"], 512);
    const Reply d = post(server, "/detokenize", {{"tokens", t.body["tokens"]}});
    ASSERT_EQ(d.status, 200) << d.raw;
    EXPECT_EQ(d.body["prompt"], c["nfc"]);
  }
  // Special tokens in text become their ids, and come back as text.
  const Reply special = post(server, "/tokenize", {{"prompt", "<|im_start|>hello<|im_end|>"}});
  EXPECT_EQ(special.body["tokens"], Json({151644, 14990, 151645}));
  EXPECT_EQ(post(server, "/detokenize", {{"tokens", {151644, 14990, 151645}}}).body["prompt"],
            "<|im_start|>hello<|im_end|>");
  EXPECT_EQ(post(server, "/detokenize", {{"tokens", Json::array()}}).body["prompt"], "");
  EXPECT_EQ(post(server, "/tokenize", {{"prompt", ""}, {"model", "synthetic-tiny"}}).body["count"], 0);
}

TEST(HttpTokenize, MessagesAreRenderedByTheChatTemplate) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server;
  const Json messages = {{{"role", "system"}, {"content", "Be brief."}},
                         {{"role", "user"}, {"content", "Hello! 你好"}}};
  const Json kwargs = {{"enable_thinking", false}};
  const Reply t = post(server, "/tokenize", {{"messages", messages}, {"chat_template_kwargs", kwargs}});
  ASSERT_EQ(t.status, 200) << t.raw;
  ChatTemplateOptions options;
  options.enable_thinking = false;
  const std::string prompt = render_chat_prompt(
      {{"system", "Be brief.", std::nullopt, {}}, {"user", "Hello! 你好", std::nullopt, {}}}, options);
  EXPECT_EQ(t.body["tokens"].get<std::vector<int32_t>>(), server.tokenizer()->encode(prompt));
  // The same count a chat completion reports as its prompt, and the text of the ids is the prompt.
  const Reply chat = post(server, "/v1/chat/completions",
                          {{"messages", messages}, {"chat_template_kwargs", kwargs}, {"max_tokens", 1}});
  ASSERT_EQ(chat.status, 200) << chat.raw;
  EXPECT_EQ(chat.body["usage"]["prompt_tokens"], t.body["count"]);
  EXPECT_EQ(post(server, "/detokenize", {{"tokens", t.body["tokens"]}}).body["prompt"], prompt);
  // add_generation_prompt false drops the assistant header.
  const Reply bare = post(server, "/tokenize", {{"messages", messages}, {"add_generation_prompt", false}});
  EXPECT_LT(bare.body["count"].get<int>(), t.body["count"].get<int>());
}

TEST(HttpTokenize, MalformedRequestsAre400sNamingTheField) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server;
  const int vocab = server.tokenizer()->vocab_size();
  struct Case {
    std::string path;
    Json body;
    int status;
    std::string param;
  };
  const std::vector<Case> cases = {
      {"/detokenize", {{"tokens", {1, -1}}}, 400, "tokens[1]"},
      {"/detokenize", {{"tokens", Json::array({vocab})}}, 400, "tokens[0]"},
      {"/detokenize",
       {{"tokens", Json::array({151935})}},
       400,
       "tokens[0]"},  // in the model's vocabulary, not the tokenizer's
      {"/detokenize", {{"tokens", Json::array({1.5})}}, 400, "tokens[0]"},
      {"/detokenize", {{"tokens", Json::array({"a"})}}, 400, "tokens[0]"},
      {"/detokenize", {{"tokens", 5}}, 400, "tokens"},
      {"/detokenize", {{"tokens", "hello"}}, 400, "tokens"},
      {"/detokenize", Json::object(), 400, "tokens"},
      {"/detokenize", {{"tokens", Json::array({1})}, {"model", "gpt-4"}}, 404, "model"},
      {"/tokenize", Json::object(), 400, "prompt"},
      {"/tokenize", {{"prompt", "a"}, {"messages", {{{"role", "user"}, {"content", "b"}}}}}, 400, "messages"},
      {"/tokenize", {{"prompt", {1, 2}}}, 400, "prompt"},
      {"/tokenize", {{"prompt", 5}}, 400, "prompt"},
      {"/tokenize", {{"messages", Json::array()}}, 400, "messages"},
      {"/tokenize", {{"messages", {{{"role", "wizard"}, {"content", "b"}}}}}, 400, "messages[0].role"},
      {"/tokenize", {{"prompt", "a"}, {"add_special_tokens", "yes"}}, 400, "add_special_tokens"},
      {"/tokenize", {{"prompt", "a"}, {"model", "other"}}, 404, "model"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path + " " + c.body.dump());
    const Reply r = post(server, c.path, c.body);
    EXPECT_EQ(r.status, c.status) << r.raw;
    ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << r.raw;
    EXPECT_EQ(r.body["error"]["param"], c.param) << r.raw;
  }
  EXPECT_EQ(send(server, "POST", "/tokenize", "{").body["error"]["code"], "invalid_json");
  EXPECT_EQ(send(server, "GET", "/tokenize").status, 405);
  EXPECT_EQ(send(server, "GET", "/detokenize").status, 405);
  EXPECT_EQ(post(server, "/tokenize", {{"prompt", "still serving"}}).status, 200);
}

TEST(HttpTokenize, WithoutTokenizerIsA400) {
  TestServer server({}, /*with_tokenizer=*/false);
  const Reply t = post(server, "/tokenize", {{"prompt", "hello"}});
  EXPECT_EQ(t.status, 400);
  EXPECT_EQ(t.body["error"]["code"], "tokenizer_unavailable");
  const Reply d = post(server, "/detokenize", {{"tokens", {1, 2}}});
  EXPECT_EQ(d.status, 400);
  EXPECT_EQ(d.body["error"]["code"], "tokenizer_unavailable");
}

}  // namespace
}  // namespace tpserve::serve::testing
