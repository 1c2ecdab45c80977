// The SSE parser (pieces split anywhere, CRLF, comments, multi-line data, an unterminated last event), the
// OpenAI chunk parser, and the serving metrics computed from hand-made timings.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/serve_client/chat_stream.h"
#include "bench/serve_client/prompt_sets.h"
#include "bench/serve_client/serve_metrics.h"
#include "bench/serve_client/sse_parser.h"
#include "common/error.h"

namespace tpserve::bench {
namespace {

TEST(SseParser, EventsSplitAnywhere) {
  const std::string stream =
      ": keep-alive comment\r\n\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: line1\ndata: "
      "line2\n\ndata:[DONE]\n\n";
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    SseParser p;
    std::vector<std::string> events;
    for (size_t at = 0; at < stream.size(); at += piece) {
      const auto got = p.feed(std::string_view(stream).substr(at, piece));
      events.insert(events.end(), got.begin(), got.end());
    }
    EXPECT_TRUE(p.finish().empty());
    ASSERT_EQ(events.size(), 3u) << "pieces of " << piece;
    EXPECT_EQ(events[0], "{\"a\":1}");
    EXPECT_EQ(events[1], "line1\nline2");
    EXPECT_EQ(events[2], "[DONE]");
  }
}

TEST(SseParser, UnterminatedLastEventIsKeptAtFinish) {
  SseParser p;
  EXPECT_TRUE(p.feed("data: tail").empty());
  EXPECT_EQ(p.finish(), std::vector<std::string>{"tail"});
}

TEST(ChatStream, ChunksAndBody) {
  EXPECT_TRUE(parse_chunk("[DONE]").done);
  const ChunkInfo c =
      parse_chunk(R"({"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]})");
  EXPECT_EQ(c.content, "Hi");
  EXPECT_TRUE(c.finish_reason.empty());
  EXPECT_TRUE(parse_chunk(R"({"choices":[{"delta":{"role":"assistant","content":null}}]})").content.empty());
  const ChunkInfo u = parse_chunk(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":17}})");
  EXPECT_EQ(u.completion_tokens, 17);
  EXPECT_EQ(parse_chunk(R"({"error":{"message":"boom"}})").error, "boom");
  EXPECT_FALSE(parse_chunk("not json").error.empty());

  const auto body = nlohmann::json::parse(chat_request_body({.model = "m", .prompt = "p", .max_tokens = 9}));
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["messages"][0]["content"], "p");
  EXPECT_EQ(body["max_tokens"], 9);
  EXPECT_FALSE(body.contains("ignore_eos"));
}

TEST(ServeMetrics, DefinitionsOnKnownTimings) {
  StreamTiming t;
  t.ok = true;
  t.content_s = {0.100, 0.120, 0.150, 0.160};  // 4 chunks
  t.e2e_s = 0.170;
  t.usage_tokens = 4;
  const RequestMetrics m = request_metrics(t);
  EXPECT_DOUBLE_EQ(m.ttft_s, 0.100);
  EXPECT_NEAR(m.tpot_s, (0.170 - 0.100) / 3, 1e-12);
  EXPECT_NEAR(m.decode_tps, 3 / 0.060, 1e-9);
  ASSERT_EQ(m.itl_s.size(), 3u);
  EXPECT_NEAR(m.itl_s[1], 0.030, 1e-12);

  StreamTiming failed;
  failed.error = "HTTP 500";
  StreamTiming one = t;
  one.content_s = {0.2};
  one.usage_tokens = -1;  // counted from chunks: one token, no TPOT
  EXPECT_TRUE(std::isnan(request_metrics(one).tpot_s));
  const LoadSummary s = summarize_load({t, failed, one}, 2.0);
  EXPECT_EQ(s.requests, 3);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.output_tokens, 5);
  EXPECT_DOUBLE_EQ(s.output_tps, 2.5);
  EXPECT_EQ(s.ttft_ms.count, 2);
  EXPECT_NEAR(s.ttft_ms.median, 150, 1e-9);
  EXPECT_EQ(s.tpot_ms.count, 1);
  EXPECT_EQ(s.itl_ms.count, 3);
  EXPECT_NE(format_load_summary(s).find("TTFT ms"), std::string::npos);
  EXPECT_EQ(to_json(s)["failed"], 1);
}

TEST(PromptSets, CycleThroughTheChosenSets) {
  EXPECT_EQ(prompt_set_names(), (std::vector<std::string>{"code", "numbers", "prose"}));
  EXPECT_EQ(prompt_for_request({"prose", "code"}, 0), prompt_set("prose")[0]);
  EXPECT_EQ(prompt_for_request({"prose", "code"}, 1), prompt_set("code")[0]);
  EXPECT_EQ(prompt_for_request({"prose", "code"}, 2), prompt_set("prose")[1]);
  EXPECT_THROW(prompt_set("poetry"), Error);
}

}  // namespace
}  // namespace tpserve::bench
