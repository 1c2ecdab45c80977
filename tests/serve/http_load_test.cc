// Continuous batching under load: 64 concurrent streaming clients each get exactly the text they get when
// alone (max_batch 8, so most of them queue), a client that disconnects mid-stream (or while it waits for a
// whole answer) has its sequence freed,
// and a KV cache too small for the offered load queues (and preempts) but completes every request.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/serve/raw_socket.h"
#include "tests/serve/test_server.h"

namespace tpserve::serve::testing {
namespace {

Json greedy(const std::string& prompt, int max_tokens, bool stream) {
  return {{"prompt", prompt},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"ignore_eos", true},
          {"stream", stream}};
}

std::string metrics_page(const TestServer& server) {
  return send(server, "GET", "/metrics").raw;
}
double gauge(const TestServer& server, const std::string& name) {
  return metric_value(metrics_page(server), "tpserve:" + name + "{model_name=\"synthetic-tiny\"}");
}

// Runs `work(i)` for i in [0, n) on n threads at once.
template <typename Work>
void run_concurrently(int n, Work work) {
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < n) std::this_thread::yield();
      work(i);
    });
  for (auto& t : threads) t.join();
}

TEST(HttpLoad, SixtyFourConcurrentStreamsGetTheirSoloText) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server({"runtime.max_batch=8"});
  constexpr int kClients = 64, kPrompts = 16;  // client i sends prompt i % 16: each solo text is needed once
  auto prompt = [](int i) {
    return "Request " + std::to_string(i % kPrompts) + ": tell me about " + std::to_string(i % kPrompts * 7);
  };
  auto max_tokens = [](int i) { return 6 + i % kPrompts % 4; };
  std::vector<std::string> solo(kPrompts);
  for (int i = 0; i < kPrompts; ++i) {
    const Reply r = post(server, "/v1/completions", greedy(prompt(i), max_tokens(i), false));
    ASSERT_EQ(r.status, 200) << r.raw;
    solo[i] = completion_text(r);
  }
  std::vector<Stream> streams(kClients);
  std::atomic<double> max_waiting{0};
  std::atomic<bool> watching{true};
  std::thread watcher([&] {  // the queue really forms: more requests than max_batch wait
    while (watching) {
      const double w = gauge(server, "num_requests_waiting");
      if (w > max_waiting) max_waiting = w;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  run_concurrently(kClients, [&](int i) {
    streams[i] = post_stream(server, "/v1/completions", greedy(prompt(i), max_tokens(i), true));
  });
  watching = false;
  watcher.join();
  for (int i = 0; i < kClients; ++i) {
    EXPECT_EQ(streams[i].status, 200) << "client " << i;
    EXPECT_TRUE(streams[i].done) << "client " << i;
    EXPECT_EQ(stream_text(streams[i]), solo[i % kPrompts]) << "client " << i;
  }
  EXPECT_GT(max_waiting.load(), 0) << "no request ever waited: the test did not exercise queueing";
  EXPECT_EQ(gauge(server, "num_requests_running"), 0);
}

// Sends a streaming request on a raw socket, reads until the first event, and closes the connection.
void stream_then_hang_up(int port, const std::string& body) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::string received;
  char buffer[4096];
  while (received.find("data: ") == std::string::npos) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    ASSERT_GT(n, 0) << "connection closed before the first event: " << received;
    received.append(buffer, n);
  }
  close(fd);
}

TEST(HttpLoad, ClientDisconnectFreesItsSequence) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server;
  constexpr int kMaxTokens = 480;
  const auto start = std::chrono::steady_clock::now();
  stream_then_hang_up(server.port(), greedy("Hang up on me", kMaxTokens, true).dump());
  // The server notices at its next write and aborts the request within a step.
  const auto deadline = start + std::chrono::seconds(60);
  while (gauge(server, "num_requests_running") != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(gauge(server, "num_requests_running"), 0);
  EXPECT_EQ(gauge(server, "kv_cache_usage_perc"), 0);
  const std::string page = metrics_page(server);
  const double generated =
      metric_value(page, "tpserve:generation_tokens_total{model_name=\"synthetic-tiny\"}");
  EXPECT_LT(generated, kMaxTokens) << "the request ran to the end instead of being aborted";
  EXPECT_EQ(metric_value(page, "tpserve:e2e_request_latency_seconds_count{model_name=\"synthetic-tiny\"}"),
            0);
  // And the server goes on serving.
  EXPECT_EQ(post(server, "/v1/completions", greedy("Still there?", 4, false)).status, 200);
}

// Also when bytes follow the request (a stray CRLF, a pipelined request): the hang-up is seen, not only an
// empty socket (those requests ran to their end).
class NonStreamingDisconnect : public ::testing::TestWithParam<std::string> {};

TEST_P(NonStreamingDisconnect, FreesItsSequence) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server;
  constexpr int kMaxTokens = 480;
  const std::string body = greedy("Hang up before the answer", kMaxTokens, false).dump();
  {
    RawSocket client(server.port());
    ASSERT_TRUE(
        client.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                    "application/json\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body + GetParam()));
    const auto running_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (gauge(server, "num_requests_running") != 1 && std::chrono::steady_clock::now() < running_by)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }  // hangs up while the request runs
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (gauge(server, "num_requests_running") != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(gauge(server, "kv_cache_usage_perc"), 0);
  const std::string page = metrics_page(server);
  EXPECT_LT(metric_value(page, "tpserve:generation_tokens_total{model_name=\"synthetic-tiny\"}"), kMaxTokens)
      << "the request ran to the end instead of being aborted";
  EXPECT_EQ(metric_value(page, "tpserve:e2e_request_latency_seconds_count{model_name=\"synthetic-tiny\"}"),
            0);
  EXPECT_EQ(post(server, "/v1/completions", greedy("Still there?", 4, false)).status, 200);
}

INSTANTIATE_TEST_SUITE_P(HttpLoad, NonStreamingDisconnect,
                         ::testing::Values("", "\r\n", "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
                         [](const ::testing::TestParamInfo<std::string>& case_info) {
                           return std::string(case_info.index == 0   ? "Nothing"
                                              : case_info.index == 1 ? "Crlf"
                                                                     : "Pipelined") +
                                  "AfterTheRequest";
                         });

TEST(HttpLoad, KvCacheExhaustionQueuesAndCompletesEveryRequest) {
  SKIP_WITHOUT_TOKENIZER();
  // 8 blocks of 16 tokens: room for two of these ~55-token sequences at a time; eight are offered at once.
  TestServer server({"runtime.max_batch=8", "runtime.num_kv_blocks=8"});
  constexpr int kClients = 8, kPrompts = 4, kTokens = 48;
  auto prompt = [](int i) { return "Sequence " + std::to_string(i % kPrompts) + " needs room"; };
  std::vector<std::string> solo(kPrompts);
  for (int i = 0; i < kPrompts; ++i)
    solo[i] = completion_text(post(server, "/v1/completions", greedy(prompt(i), kTokens, false)));
  std::vector<Reply> replies(kClients);
  std::vector<Stream> streams(kClients);
  run_concurrently(kClients, [&](int i) {
    if (i % 2)
      streams[i] = post_stream(server, "/v1/completions", greedy(prompt(i), kTokens, true));
    else
      replies[i] = post(server, "/v1/completions", greedy(prompt(i), kTokens, false));
  });
  for (int i = 0; i < kClients; ++i) {
    if (i % 2) {
      EXPECT_TRUE(streams[i].done) << "client " << i;
      EXPECT_EQ(stream_text(streams[i]), solo[i % kPrompts]) << "client " << i;
    } else {
      ASSERT_EQ(replies[i].status, 200) << replies[i].raw;
      EXPECT_EQ(replies[i].body["usage"]["completion_tokens"], kTokens);
      EXPECT_EQ(completion_text(replies[i]), solo[i % kPrompts]) << "client " << i;
    }
  }
  EXPECT_GT(
      metric_value(metrics_page(server), "tpserve:num_preemptions_total{model_name=\"synthetic-tiny\"}"), 0)
      << "the cache never ran out: the test did not exercise preemption";
  // A request that can never fit the cache is refused up front instead of waiting forever.
  const Reply too_big = post(server, "/v1/completions", greedy("x", 130, false));
  EXPECT_EQ(too_big.status, 400);
  EXPECT_EQ(too_big.body["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(gauge(server, "kv_cache_usage_perc"), 0);
}

}  // namespace
}  // namespace tpserve::serve::testing
