// Logit bias, penalties and min_tokens over HTTP: a bias of 100 makes greedy decoding repeat its token,
// min_tokens keeps a stop token id and a stop string from ending the answer early, penalties reach the
// engine (a repetition penalty below 1 changes the greedy tokens of the random tiny model).
#include <gtest/gtest.h>

#include "tests/serve/qwen3_tokenizer.h"
#include "tests/serve/test_server.h"

namespace tpserve::serve::testing {
namespace {

// ids_completion (test_server.h) with the generated ids returned.
Json ids_completion_returning_ids(int max_tokens, Json extra = Json::object()) {
  extra["return_token_ids"] = true;
  return ids_completion(max_tokens, std::move(extra));
}

std::vector<int32_t> token_ids(const Reply& r) {
  EXPECT_EQ(r.status, 200) << r.raw;
  return r.body["choices"][0]["token_ids"].get<std::vector<int32_t>>();
}

TEST(HttpLogitProcessing, BiasPenaltiesAndMinTokensWithoutATokenizer) {
  TestServer server({}, false);
  EXPECT_EQ(token_ids(post(server, "/v1/completions",
                           ids_completion_returning_ids(5, {{"logit_bias", {{"77", 100}}}}))),
            std::vector<int32_t>(5, 77));
  const std::vector<int32_t> plain =
      token_ids(post(server, "/v1/completions", ids_completion_returning_ids(6)));
  ASSERT_EQ(plain.size(), 6u);
  // The first greedy token as a stop token: the answer ends at once, unless min_tokens holds it off.
  const Json stop = {{"stop_token_ids", {plain[0]}}};
  Reply r = post(server, "/v1/completions", ids_completion_returning_ids(6, stop));
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 1);
  Json held = stop;
  held["min_tokens"] = 4;
  r = post(server, "/v1/completions", ids_completion_returning_ids(6, held));
  const std::vector<int32_t> ids = token_ids(r);
  ASSERT_GE(ids.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_NE(ids[i], plain[0]) << i;
  // A repetition penalty below 1 makes the random model repeat the prompt's tokens; presence and frequency
  // penalties then each push it off them.
  const std::vector<int32_t> repeated = token_ids(
      post(server, "/v1/completions", ids_completion_returning_ids(6, {{"repetition_penalty", 0.25}})));
  EXPECT_NE(repeated, plain);
  for (const char* penalty : {"presence_penalty", "frequency_penalty"})
    EXPECT_NE(token_ids(post(server, "/v1/completions",
                             ids_completion_returning_ids(6, {{"repetition_penalty", 0.25}, {penalty, 2}}))),
              repeated)
        << penalty;
  // Neutral values change nothing.
  EXPECT_EQ(token_ids(post(server, "/v1/completions",
                           ids_completion_returning_ids(6, {{"presence_penalty", 0},
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
  const Reply r = post(server, "/v1/completions",
                       ids_completion_returning_ids(4, {{"stop_token_ids", stops}, {"min_tokens", 2}}));
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body["error"]["type"], "invalid_request_error");
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find("a step carries at most"), std::string::npos)
      << r.raw;
  EXPECT_EQ(token_ids(post(server, "/v1/completions", ids_completion_returning_ids(2))).size(), 2u);
}

// Stop strings count in the text of generated token number min_tokens on (vLLM's: once more than min_tokens
// tokens were generated), as EOS and stop_token_ids may be drawn from that token on.
TEST(HttpLogitProcessing, StopStringsCountFromTokenNumberMinTokensOn) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server;
  const Json base = {{"prompt", "Hello"}, {"max_tokens", 2}, {"temperature", 0}, {"ignore_eos", true}};
  auto text_of = [&](const Json& body) {
    const Reply r = post(server, "/v1/completions", body);
    EXPECT_EQ(r.status, 200) << r.raw;
    return std::pair{r.body["choices"][0]["text"].get<std::string>(),
                     r.body["choices"][0]["finish_reason"].get<std::string>()};
  };
  Json one = base;
  one["max_tokens"] = 1;
  const std::string first = text_of(one).first, both = text_of(base).first;
  ASSERT_FALSE(first.empty());
  ASSERT_GT(both.size(), first.size());
  const std::string second = both.substr(first.size());
  ASSERT_EQ(first.find(second), std::string::npos) << "the second token's text appears in the first's";
  Json stop_first = base;
  stop_first["stop"] = first;
  EXPECT_EQ(text_of(stop_first), (std::pair<std::string, std::string>{"", "stop"}));
  stop_first["min_tokens"] = 1;  // token 0 cannot stop the answer
  EXPECT_EQ(text_of(stop_first), (std::pair<std::string, std::string>{both, "length"}));
  Json stop_second = base;
  stop_second["stop"] = second;
  stop_second["min_tokens"] = 1;  // token 1 can
  EXPECT_EQ(text_of(stop_second), (std::pair<std::string, std::string>{first, "stop"}));
  stop_second["min_tokens"] = 2;
  EXPECT_EQ(text_of(stop_second), (std::pair<std::string, std::string>{both, "length"}));
}

}  // namespace
}  // namespace tpserve::serve::testing
