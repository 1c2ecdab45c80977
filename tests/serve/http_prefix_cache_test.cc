// Prefix caching as clients see it: usage.prompt_tokens_details.cached_tokens (whole and streamed answers)
// and the tpserve:prefix_cache_* counters of /metrics, with the cache on (the default) and off. Token-id
// prompts: no tokenizer needed.
#include <gtest/gtest.h>

#include "tests/serve/test_server.h"

namespace tpserve::serve::testing {
namespace {

Json ids_completion(int n, int max_tokens, Json extra = Json::object()) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < n; ++i) prompt.push_back(1000 + 7 * i);
  Json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}};
  body.update(extra);
  return body;
}

int cached_tokens(const Json& usage) {
  return usage.at("prompt_tokens_details").at("cached_tokens").get<int>();
}

TEST(HttpPrefixCache, UsageAndMetricsCountTheCachedPromptTokens) {
  for (bool enabled : {true, false}) {
    SCOPED_TRACE(enabled ? "prefix caching on" : "prefix caching off");
    TestServer server({std::string("runtime.enable_prefix_caching=") + (enabled ? "true" : "false")}, false);
    const Reply first = post(server, "/v1/completions", ids_completion(40, 4));
    ASSERT_EQ(first.status, 200) << first.raw;
    EXPECT_EQ(cached_tokens(first.body["usage"]), 0);
    // The same 40 tokens again: the first two blocks of 16 are cached (the third is not full).
    const Reply again = post(server, "/v1/completions", ids_completion(40, 4));
    ASSERT_EQ(again.status, 200) << again.raw;
    EXPECT_EQ(cached_tokens(again.body["usage"]), enabled ? 32 : 0);
    EXPECT_EQ(again.body["choices"][0]["text"], first.body["choices"][0]["text"]);
    const Stream streamed =
        post_stream(server, "/v1/completions",
                    ids_completion(40, 4, {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
    ASSERT_EQ(streamed.status, 200) << streamed.raw;
    EXPECT_EQ(cached_tokens(streamed.events.back()["usage"]), enabled ? 32 : 0);

    const std::string page = send(server, "GET", "/metrics").raw;
    const std::string label = "{model_name=\"synthetic-tiny\"}";
    EXPECT_EQ(metric_value(page, "tpserve:prefix_cache_queries_total" + label), enabled ? 120 : 0) << page;
    EXPECT_EQ(metric_value(page, "tpserve:prefix_cache_hits_total" + label), enabled ? 64 : 0);
  }
}

}  // namespace
}  // namespace tpserve::serve::testing
