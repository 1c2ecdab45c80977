// Log-probabilities over HTTP: completions' legacy shape and chat's content list, whole and streamed (the
// chunks together give the whole answer's), named by token text or, without a tokenizer, token_id:<id>;
// null when not asked; limits refused with a 400.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/serve/utf8.h"
#include "tests/serve/qwen3_tokenizer.h"
#include "tests/serve/test_server.h"

namespace tpserve::serve::testing {
namespace {

TEST(HttpLogprobs, CompletionsWholeAndStreamedWithoutATokenizer) {
  TestServer server({}, false);
  const Reply r = post(server, "/v1/completions", ids_completion(6, {{"logprobs", 3}}));
  ASSERT_EQ(r.status, 200) << r.raw;
  const Json& choice = r.body["choices"][0];
  const Json& lp = choice["logprobs"];
  const auto ids = choice["token_ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(ids.size(), 6u);
  ASSERT_EQ(lp["tokens"].size(), 6u);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(lp["tokens"][i], "token_id:" + std::to_string(ids[i]));
    const double drawn = lp["token_logprobs"][i].get<double>();
    EXPECT_LE(drawn, 0.0);
    const Json& top = lp["top_logprobs"][i];
    ASSERT_EQ(top.size(), 3u);
    double best = -1e9;
    for (const auto& [token, logprob] : top.items()) best = std::max(best, logprob.get<double>());
    EXPECT_DOUBLE_EQ(drawn, best);  // greedy: the drawn token is the most likely
    EXPECT_TRUE(top.contains(lp["tokens"][i].get<std::string>()));
    if (i > 0) {
      EXPECT_EQ(lp["text_offset"][i].get<size_t>(),
                lp["text_offset"][i - 1].get<size_t>() + lp["tokens"][i - 1].get<std::string>().size());
    }
  }
  // Streamed: the chunks' entries, in order, are the whole answer's.
  const Stream s =
      post_stream(server, "/v1/completions", ids_completion(6, {{"logprobs", 3}, {"stream", true}}));
  ASSERT_EQ(s.status, 200) << s.raw;
  Json tokens = Json::array(), logprobs = Json::array(), offsets = Json::array();
  for (const Json& e : s.events) {
    if (e["choices"].empty() || e["choices"][0]["logprobs"].is_null()) continue;
    const Json& l = e["choices"][0]["logprobs"];
    for (size_t i = 0; i < l["tokens"].size(); ++i) {
      tokens.push_back(l["tokens"][i]);
      logprobs.push_back(l["token_logprobs"][i]);
      offsets.push_back(l["text_offset"][i]);
    }
  }
  EXPECT_EQ(tokens, lp["tokens"]);
  EXPECT_EQ(offsets, lp["text_offset"]);
  ASSERT_EQ(logprobs.size(), 6u);
  for (size_t i = 0; i < 6; ++i)
    EXPECT_NEAR(logprobs[i].get<double>(), lp["token_logprobs"][i].get<double>(), 1e-6);
  // logprobs 0: top_logprobs holds the drawn token alone (OpenAI's legacy shape always has it); sampled
  // tokens outside the top n are added to it; not asked: null.
  const Reply zero = post(server, "/v1/completions", ids_completion(2, {{"logprobs", 0}}));
  ASSERT_EQ(zero.status, 200) << zero.raw;
  const Json& zl = zero.body["choices"][0]["logprobs"];
  ASSERT_EQ(zl["top_logprobs"][0].size(), 1u);
  EXPECT_EQ(zl["top_logprobs"][0].begin().key(), zl["tokens"][0].get<std::string>());
  const Reply sampled =
      post(server, "/v1/completions", ids_completion(16, {{"logprobs", 1}, {"temperature", 2}, {"seed", 3}}));
  ASSERT_EQ(sampled.status, 200) << sampled.raw;
  const Json& sl = sampled.body["choices"][0]["logprobs"];
  int outside = 0;
  for (size_t i = 0; i < 16; ++i) {
    const Json& top = sl["top_logprobs"][i];
    EXPECT_TRUE(top.contains(sl["tokens"][i].get<std::string>()));
    EXPECT_LE(top.size(), 2u);
    outside += top.size() == 2;
  }
  EXPECT_GT(outside, 0) << "temperature 2 should draw some token other than the most likely";
  EXPECT_TRUE(post(server, "/v1/completions", ids_completion(2)).body["choices"][0]["logprobs"].is_null());
}

TEST(HttpLogprobs, ChatContentWithBytes) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server;
  const Json body = {{"messages", {{{"role", "user"}, {"content", "Count to three."}}}},
                     {"max_tokens", 8},
                     {"temperature", 0},
                     {"logprobs", true},
                     {"top_logprobs", 2}};
  const Reply r = post(server, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  const Json& content = r.body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), r.body["usage"]["completion_tokens"].get<size_t>());
  for (const Json& t : content) {
    std::string bytes;
    for (const Json& b : t["bytes"]) bytes.push_back(static_cast<char>(b.get<int>()));
    EXPECT_EQ(t["token"].get<std::string>(), repair_utf8(bytes));
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
    ASSERT_EQ(t["top_logprobs"].size(), 2u);
    EXPECT_GE(t["top_logprobs"][0]["logprob"].get<double>(), t["top_logprobs"][1]["logprob"].get<double>());
    EXPECT_DOUBLE_EQ(t["logprob"].get<double>(), t["top_logprobs"][0]["logprob"].get<double>());
  }
  // Streamed: the chunks' content entries together.
  Json streamed_body = body;
  streamed_body["stream"] = true;
  const Stream s = post_stream(server, "/v1/chat/completions", streamed_body);
  Json all = Json::array();
  for (const Json& e : s.events)
    if (!e["choices"].empty() && !e["choices"][0]["logprobs"].is_null())
      for (const Json& t : e["choices"][0]["logprobs"]["content"]) all.push_back(t["token"]);
  ASSERT_EQ(all.size(), content.size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], content[i]["token"]);
}

TEST(HttpLogprobs, MoreThanTheServerReturnsIsRefused) {
  TestServer server({"runtime.sampling_candidates=8"}, false);
  const Reply r = post(server, "/v1/completions", ids_completion(2, {{"logprobs", 9}}));
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body["error"]["param"], "logprobs");
  EXPECT_EQ(post(server, "/v1/completions", ids_completion(2, {{"logprobs", 8}})).status, 200);
}

}  // namespace
}  // namespace tpserve::serve::testing
