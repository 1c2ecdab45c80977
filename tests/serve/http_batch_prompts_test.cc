// Completions with a batch of prompts (a list of strings or of lists of token ids, as OpenAI's API and vLLM
// take them) and with echo: choices prompt-major (index = prompt x n + i), each the answer its prompt gets
// alone with the same seed, whole and streamed; usage counts every prompt once; echo puts the prompt's text
// before each choice's.
#include <gtest/gtest.h>

#include <map>

#include "tests/serve/qwen3_tokenizer.h"
#include "tests/serve/test_server.h"

namespace tpserve::serve::testing {
namespace {

const std::vector<std::vector<int32_t>> kPrompts = {
    {1000, 1007, 1014}, {2000, 2001}, {3000, 3003, 3006, 3009}};

Json body(Json prompt, int n, Json extra = Json::object()) {
  Json b = {{"prompt", std::move(prompt)}, {"max_tokens", 5}, {"n", n},
            {"temperature", 0.9},          {"seed", 11},      {"ignore_eos", true},
            {"return_token_ids", true}};
  b.update(extra);
  return b;
}

std::vector<std::vector<int32_t>> choice_ids(const Reply& r) {
  EXPECT_EQ(r.status, 200) << r.raw;
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < r.body["choices"].size(); ++i) {
    EXPECT_EQ(r.body["choices"][i]["index"], i);
    out.push_back(r.body["choices"][i]["token_ids"].get<std::vector<int32_t>>());
  }
  return out;
}

TEST(HttpBatchPrompts, ChoicesArePromptMajorAndEachIsItsPromptsAnswer) {
  TestServer server({}, false);
  const Reply batch = post(server, "/v1/completions", body(kPrompts, 2));
  const auto got = choice_ids(batch);
  ASSERT_EQ(got.size(), 6u);
  int prompt_tokens = 0;
  for (size_t p = 0; p < kPrompts.size(); ++p) {
    prompt_tokens += static_cast<int>(kPrompts[p].size());
    const auto alone = choice_ids(post(server, "/v1/completions", body(kPrompts[p], 2)));
    ASSERT_EQ(alone.size(), 2u);
    EXPECT_EQ(got[2 * p], alone[0]) << "prompt " << p;
    EXPECT_EQ(got[2 * p + 1], alone[1]) << "prompt " << p;
  }
  EXPECT_EQ(batch.body["usage"]["prompt_tokens"], prompt_tokens);  // each prompt once
  EXPECT_EQ(batch.body["usage"]["completion_tokens"], 30);

  // Streamed: each index's chunks give its whole choice; one finish chunk each; the same usage.
  const Stream s =
      post_stream(server, "/v1/completions",
                  body(kPrompts, 2, {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(s.status, 200) << s.raw;
  std::map<int, std::vector<int32_t>> streamed;
  std::map<int, int> finishes;
  Json usage;
  for (const Json& e : s.events) {
    if (e.contains("usage") && !e["usage"].is_null()) usage = e["usage"];
    for (const Json& c : e["choices"]) {
      const int i = c["index"];
      if (c.contains("token_ids"))
        for (int32_t t : c["token_ids"]) streamed[i].push_back(t);
      if (!c["finish_reason"].is_null()) ++finishes[i];
    }
  }
  ASSERT_EQ(streamed.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(streamed[i], got[i]) << i;
    EXPECT_EQ(finishes[i], 1) << i;
  }
  EXPECT_EQ(usage, batch.body["usage"]);
}

// Without a seed every choice of every prompt draws its own: the same prompt twice gives two samples.
TEST(HttpBatchPrompts, UnseededChoicesDrawApart) {
  TestServer server({}, false);
  Json b = body(std::vector<std::vector<int32_t>>(3, kPrompts[0]), 2, {{"temperature", 1.0}});
  b.erase("seed");
  const auto got = choice_ids(post(server, "/v1/completions", b));
  ASSERT_EQ(got.size(), 6u);
  for (size_t i = 0; i < got.size(); ++i)
    for (size_t j = i + 1; j < got.size(); ++j) EXPECT_NE(got[i], got[j]) << i << " " << j;
}

// stream_options.continuous_usage_stats (with include_usage): every chunk carries its choice's usage so far
// (vLLM's): its prompt's tokens and the tokens the choice has generated; without include_usage, none.
TEST(HttpBatchPrompts, ContinuousUsageCountsEachChoiceSoFar) {
  TestServer server({}, false);
  const Json options = {{"include_usage", true}, {"continuous_usage_stats", true}};
  const Stream s =
      post_stream(server, "/v1/completions",
                  body({kPrompts[0], kPrompts[1]}, 2, {{"stream", true}, {"stream_options", options}}));
  ASSERT_EQ(s.status, 200) << s.raw;
  std::map<int, int> streamed;
  int chunks = 0;
  for (const Json& e : s.events) {
    if (e["choices"].empty()) continue;  // the last usage chunk
    ++chunks;
    ASSERT_TRUE(e.contains("usage")) << e.dump();
    const Json& c = e["choices"][0];
    const int i = c["index"];
    if (c.contains("token_ids")) streamed[i] += static_cast<int>(c["token_ids"].size());
    EXPECT_EQ(e["usage"]["prompt_tokens"], kPrompts[i / 2].size()) << e.dump();
    EXPECT_EQ(e["usage"]["completion_tokens"], streamed[i]) << e.dump();
    EXPECT_EQ(e["usage"]["total_tokens"], streamed[i] + static_cast<int>(kPrompts[i / 2].size()));
  }
  EXPECT_GE(chunks, 4 * 2);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(streamed[i], 5) << i;
  Json plain_options = options;
  plain_options["include_usage"] = false;
  const Stream quiet = post_stream(
      server, "/v1/completions", body(kPrompts[0], 1, {{"stream", true}, {"stream_options", plain_options}}));
  for (const Json& e : quiet.events) EXPECT_FALSE(e.contains("usage") && !e["usage"].is_null()) << e.dump();
}

TEST(HttpBatchPrompts, EchoPutsThePromptsTextFirst) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server;
  const Json prompts = {"Hello there", "Numbers: 1 2 3"};
  const Reply plain = post(server, "/v1/completions", body(prompts, 1, {{"temperature", 0}}));
  const Reply echoed =
      post(server, "/v1/completions", body(prompts, 1, {{"temperature", 0}, {"echo", true}}));
  ASSERT_EQ(plain.status, 200) << plain.raw;
  ASSERT_EQ(echoed.status, 200) << echoed.raw;
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_EQ(echoed.body["choices"][p]["text"],
              prompts[p].get<std::string>() + plain.body["choices"][p]["text"].get<std::string>());
    EXPECT_EQ(echoed.body["choices"][p]["token_ids"],
              plain.body["choices"][p]["token_ids"]);  // generated only
  }
  EXPECT_EQ(echoed.body["usage"], plain.body["usage"]);
  // Streamed: the chunks' text together is the whole answer's.
  const Stream s = post_stream(server, "/v1/completions",
                               body(prompts, 1, {{"temperature", 0}, {"echo", true}, {"stream", true}}));
  std::map<int, std::string> text;
  for (const Json& e : s.events)
    for (const Json& c : e["choices"]) text[c["index"].get<int>()] += c["text"].get<std::string>();
  for (int p = 0; p < 2; ++p) EXPECT_EQ(text[p], echoed.body["choices"][p]["text"]) << p;
  // Token ids are echoed as their text (special tokens included).
  const std::vector<int32_t> ids = server.tokenizer()->encode("Hi<|im_end|>");
  const Reply by_ids = post(server, "/v1/completions", body(ids, 1, {{"temperature", 0}, {"echo", true}}));
  ASSERT_EQ(by_ids.status, 200) << by_ids.raw;
  EXPECT_EQ(by_ids.body["choices"][0]["text"].get<std::string>().rfind("Hi<|im_end|>", 0), 0u) << by_ids.raw;
}

TEST(HttpBatchPrompts, EchoOfTokenIdsNeedsATokenizer) {
  TestServer server({}, false);
  const Reply r = post(server, "/v1/completions", body(kPrompts[0], 1, {{"echo", true}}));
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body["error"]["param"], "echo");
  EXPECT_EQ(r.body["error"]["code"], "tokenizer_unavailable");
}

}  // namespace
}  // namespace tpserve::serve::testing
