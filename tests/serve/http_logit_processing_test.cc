// Logit bias, penalties and min_tokens over HTTP: a bias of 100 makes greedy decoding repeat its token,
// min_tokens keeps a stop token id and a stop string from ending the answer early, penalties reach the
// engine (a repetition penalty below 1 changes the greedy tokens of the random tiny model).
#include <gtest/gtest.h>

#include "tests/serve/qwen3_tokenizer.h"
#include "tests/serve/test_server.h"

namespace tpserve::serve::testing {
namespace {

Json ids_completion(int max_tokens, Json extra = Json::object()) {
  Json body = {{"prompt", {1000, 1007, 1014, 1021, 1028}},
               {"max_tokens", max_tokens},
               {"temperature", 0},
               {"ignore_eos", true},
               {"return_token_ids", true}};
  body.update(extra);
  return body;
}

std::vector<int32_t> token_ids(const Reply& r) {
  EXPECT_EQ(r.status, 200) << r.raw;
  return r.body["choices"][0]["token_ids"].get<std::vector<int32_t>>();
}

TEST(HttpLogitProcessing, BiasPenaltiesAndMinTokensWithoutATokenizer) {
  TestServer server({}, false);
  EXPECT_EQ(token_ids(post(server, "/v1/completions", ids_completion(5, {{"logit_bias", {{"77", 100}}}}))),
            std::vector<int32_t>(5, 77));
  const std::vector<int32_t> plain = token_ids(post(server, "/v1/completions", ids_completion(6)));
  ASSERT_EQ(plain.size(), 6u);
  // The first greedy token as a stop token: the answer ends at once, unless min_tokens holds it off.
  const Json stop = {{"stop_token_ids", {plain[0]}}};
  Reply r = post(server, "/v1/completions", ids_completion(6, stop));
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 1);
  Json held = stop;
  held["min_tokens"] = 4;
  r = post(server, "/v1/completions", ids_completion(6, held));
  const std::vector<int32_t> ids = token_ids(r);
  ASSERT_GE(ids.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_NE(ids[i], plain[0]) << i;
  EXPECT_NE(token_ids(post(server, "/v1/completions", ids_completion(6, {{"repetition_penalty", 0.25}}))),
            plain);
  // Neutral values change nothing.
  EXPECT_EQ(token_ids(post(server, "/v1/completions",
                           ids_completion(6, {{"presence_penalty", 0},
                                              {"frequency_penalty", 0},
                                              {"repetition_penalty", 1},
                                              {"min_tokens", 0},
                                              {"logit_bias", {{"5", 0}}}}))),
            plain);
}

// A request whose adjustments could exceed a step's room is refused by the engine: a 400 that says why,
// and the server keeps serving.
TEST(HttpLogitProcessing, MoreAdjustmentsThanAStepHoldsIsA400) {
  TestServer server({"server.max_stop_sequences=65536"}, false);
  std::vector<int32_t> stops(20000);
  for (int i = 0; i < 20000; ++i) stops[i] = 2 * i;
  const Reply r =
      post(server, "/v1/completions", ids_completion(4, {{"stop_token_ids", stops}, {"min_tokens", 2}}));
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body["error"]["type"], "invalid_request_error");
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find("a step carries at most"), std::string::npos)
      << r.raw;
  EXPECT_EQ(token_ids(post(server, "/v1/completions", ids_completion(2))).size(), 2u);
}

TEST(HttpLogitProcessing, StopStringsCountFromMinTokensOn) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server;
  const Json base = {{"prompt", "Hello"}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}};
  const Reply plain = post(server, "/v1/completions", base);
  ASSERT_EQ(plain.status, 200) << plain.raw;
  const std::string text = plain.body["choices"][0]["text"];
  ASSERT_GE(text.size(), 2u);
  Json stopped = base;
  stopped["stop"] = text.substr(0, 2);
  Reply r = post(server, "/v1/completions", stopped);
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r.body["choices"][0]["text"], "");
  // With min_tokens = max_tokens only a stop string ending in the last token's text could count.
  stopped["min_tokens"] = 8;
  r = post(server, "/v1/completions", stopped);
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "length") << r.raw;
  EXPECT_EQ(r.body["choices"][0]["text"], text);
}

}  // namespace
}  // namespace tpserve::serve::testing
