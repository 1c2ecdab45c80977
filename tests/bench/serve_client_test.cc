// serve_client against a fake OpenAI streaming server (httplib on 127.0.0.1, an ephemeral port) that sends
// known chunks with known delays: the measured TTFT, ITL, TPOT, decode tok/s and token counts must match
// what the server did, and HTTP errors and a missing usage chunk must be handled.
#include <gtest/gtest.h>

#include <httplib.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <thread>

#include "bench/serve_client/load_run.h"
#include "bench/serve_client/serve_metrics.h"
#include "common/error.h"

namespace tpserve::bench {
namespace {

struct FakeStream {
  int chunks = 5;
  int first_delay_ms = 60;  // request -> first content chunk
  int gap_ms = 20;          // between content chunks
  bool usage = true;
};

class FakeServer {
 public:
  explicit FakeServer(FakeStream stream) : stream_(stream) {
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})",
                      "application/json");
    });
    server_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      const auto body = nlohmann::json::parse(req.body);
      if (body["model"] != "fake-model" || body["stream"] != true) {
        res.status = 400;
        res.set_content(R"({"error":{"message":"unknown model"}})", "application/json");
        return;
      }
      const int n = std::min(stream_.chunks, body["max_tokens"].get<int>());
      const FakeStream s = stream_;
      res.set_chunked_content_provider("text/event-stream", [s, n](size_t, httplib::DataSink& sink) {
        auto send = [&](const std::string& data) {
          const std::string event = "data: " + data + "\n\n";
          sink.write(event.data(), event.size());
        };
        send(R"({"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]})");
        std::this_thread::sleep_for(std::chrono::milliseconds(s.first_delay_ms));
        for (int i = 0; i < n; ++i) {
          if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(s.gap_ms));
          send(R"({"choices":[{"index":0,"delta":{"content":"tok )" + std::to_string(i) +
               R"("},"finish_reason":null}]})");
        }
        send(R"({"choices":[{"index":0,"delta":{},"finish_reason":"length"}]})");
        if (s.usage)
          send(R"({"choices":[],"usage":{"prompt_tokens":7,"prompt_tokens_details":{"cached_tokens":3},)"
               R"("completion_tokens":)" +
               std::to_string(n) + "}}");
        send("[DONE]");
        sink.done();
        return true;
      });
    });
    server_.set_tcp_nodelay(true);  // every chunk leaves when written
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  FakeStream stream_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(ServeClient, MetricsMatchTheServersTiming) {
  FakeServer server({.chunks = 5, .first_delay_ms = 60, .gap_ms = 20, .usage = true});
  LoadOptions o;
  o.url = server.url();
  o.concurrency = 4;
  o.requests = 8;
  o.max_tokens = 16;
  int progress_calls = 0;
  const LoadResult r = run_load(o, [&](int, int) { ++progress_calls; });
  EXPECT_EQ(r.model, "fake-model");  // from /v1/models
  EXPECT_EQ(progress_calls, 8);
  for (const StreamTiming& t : r.requests) {
    ASSERT_TRUE(t.ok) << t.error;
    EXPECT_EQ(t.content_s.size(), 5u);
    EXPECT_EQ(t.output_tokens(), 5);
    EXPECT_EQ(t.finish_reason, "length");
    EXPECT_EQ(t.text, "tok 0tok 1tok 2tok 3tok 4");
  }
  // Server sleeps only ever run late, so bounds measured from the request's start (TTFT, E2E) are exact lower
  // bounds. Gaps between chunks are not: a chunk the client reads late shortens the next gap, so those get
  // loose two-sided bounds on the median (upper bounds allow a loaded 2-core machine).
  const LoadSummary s = summarize_load(r.requests, r.duration_s);
  EXPECT_EQ(s.failed, 0);
  EXPECT_EQ(s.output_tokens, 40);
  EXPECT_EQ(s.prompt_tokens, 8 * 7);
  EXPECT_EQ(s.cached_prompt_tokens, 8 * 3);
  EXPECT_NE(format_load_summary(s).find("prompt tokens 56, 24 of them cached"), std::string::npos);
  EXPECT_DOUBLE_EQ(s.output_tps, 40 / r.duration_s);
  EXPECT_GE(s.ttft_ms.min, 60);
  EXPECT_LT(s.ttft_ms.median, 60 + 150);
  EXPECT_EQ(s.itl_ms.count, 8 * 4);
  EXPECT_GE(s.itl_ms.median, 20 * 0.5);
  EXPECT_LT(s.itl_ms.median, 20 + 60);
  EXPECT_GE(s.tpot_ms.median, 20 * 0.5);  // (E2E - TTFT) / 4 over four 20 ms gaps
  EXPECT_LT(s.tpot_ms.median, 20 + 60);
  EXPECT_LE(s.decode_tps.max, 4 / 0.080 * 1.05);  // 4 tokens after the first in >= 80 ms
  EXPECT_GT(s.decode_tps.median, 4 / 0.320);
  EXPECT_GE(s.e2e_ms.min, 60 + 4 * 20);
  // Two waves of four requests, at least 140 ms each.
  EXPECT_GE(r.duration_s, 0.28 * 0.95);
}

TEST(ServeClient, CountsChunksWithoutUsageAndReportsHttpErrors) {
  FakeServer server({.chunks = 3, .first_delay_ms = 1, .gap_ms = 1, .usage = false});
  LoadOptions o;
  o.url = server.url() + "/";  // a trailing slash is not a path prefix
  o.concurrency = 2;
  o.requests = 2;
  o.max_tokens = 2;  // the server stops at max_tokens
  const LoadResult r = run_load(o);
  ASSERT_TRUE(r.requests[0].ok) << r.requests[0].error;
  EXPECT_EQ(r.requests[0].usage_tokens, -1);
  EXPECT_EQ(r.requests[0].cached_tokens, -1);
  EXPECT_EQ(r.requests[0].output_tokens(), 2);
  EXPECT_EQ(summarize_load(r.requests, r.duration_s).prompt_tokens, -1);

  o.model = "other-model";
  const LoadResult bad = run_load(o);
  EXPECT_FALSE(bad.requests[0].ok);
  EXPECT_NE(bad.requests[0].error.find("HTTP 400"), std::string::npos) << bad.requests[0].error;
  EXPECT_NE(bad.requests[0].error.find("unknown model"), std::string::npos);
  EXPECT_EQ(summarize_load(bad.requests, bad.duration_s).failed, 2);

  o.url = "http://127.0.0.1:1";  // nothing listens there
  o.model = "fake-model";
  const LoadResult down = run_load(o);
  EXPECT_FALSE(down.requests[0].ok);
  EXPECT_NE(down.requests[0].error.find("transport error"), std::string::npos);
}

TEST(ServeClient, SplitUrl) {
  EXPECT_EQ(split_url("http://h:8000"), (std::pair<std::string, std::string>{"http://h:8000", ""}));
  EXPECT_EQ(split_url("http://h:8000/api/"), (std::pair<std::string, std::string>{"http://h:8000", "/api"}));
  EXPECT_THROW(split_url("h:8000"), Error);
}

}  // namespace
}  // namespace tpserve::bench
