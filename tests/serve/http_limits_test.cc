// The server's request limits (server.* in the config): prompt, output and stop limits (400) and the queue
// limit (503): each one, when hit, gets its documented status and error code, the requests just inside it
// are served, and the server keeps serving afterwards. Connection limits: http_connection_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/serve/raw_socket.h"
#include "tests/serve/test_server.h"

namespace tpserve::serve::testing {
namespace {

const std::string kC = "/v1/completions";
const std::string kChat = "/v1/chat/completions";

Json ids_prompt(int n, Json extra = Json::object()) {
  Json body = {{"prompt", std::vector<int>(n, 100)}, {"max_tokens", 2}, {"temperature", 0}};
  body.update(extra);
  return body;
}

void expect_refused(const Reply& r, int status, const std::string& param, const std::string& code) {
  EXPECT_EQ(r.status, status) << r.raw;
  ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << r.raw;
  EXPECT_EQ(r.body["error"]["code"], code) << r.raw;
  if (param.empty())
    EXPECT_TRUE(r.body["error"]["param"].is_null()) << r.raw;
  else
    EXPECT_EQ(r.body["error"]["param"], param) << r.raw;
}

TEST(HttpLimits, PromptOutputAndStopLimitsAre400s) {
  TestServer server({"server.max_prompt_tokens=8", "server.max_output_tokens=16",
                     "server.max_stop_sequences=2", "server.max_stop_string_bytes=8"});
  // Prompt length: 8 tokens pass, 9 do not.
  EXPECT_EQ(post(server, kC, ids_prompt(8)).status, 200);
  expect_refused(post(server, kC, ids_prompt(9)), 400, "prompt", "limit_exceeded");
  // A batch names the prompt that is too long.
  expect_refused(post(server, kC, {{"prompt", {std::vector<int>(9, 7)}}}), 400, "prompt[0]",
                 "limit_exceeded");
  expect_refused(post(server, kC, {{"prompt", {std::vector<int>(3, 7), std::vector<int>(9, 7)}}}), 400,
                 "prompt[1]", "limit_exceeded");
  // max_tokens: 16 passes, 17 does not; absent means min(16, room).
  EXPECT_EQ(post(server, kC, ids_prompt(4, {{"max_tokens", 16}})).status, 200);
  const Reply over = post(server, kC, ids_prompt(4, {{"max_tokens", 17}}));
  expect_refused(over, 400, "max_tokens", "limit_exceeded");
  EXPECT_NE(over.body["error"]["message"].get<std::string>().find("at most 16"), std::string::npos)
      << over.raw;
  Json no_max = ids_prompt(4, {{"ignore_eos", true}});
  no_max.erase("max_tokens");
  const Reply fill = post(server, kC, no_max);
  ASSERT_EQ(fill.status, 200) << fill.raw;
  EXPECT_EQ(fill.body["usage"]["completion_tokens"], 16);
  // stop and stop_token_ids: at most 2 entries, stop strings of at most 8 bytes.
  EXPECT_EQ(post(server, kC, ids_prompt(4, {{"stop", {"ab", "12345678"}}})).status, 200);
  expect_refused(post(server, kC, ids_prompt(4, {{"stop", {"a", "b", "c"}}})), 400, "stop", "limit_exceeded");
  expect_refused(post(server, kC, ids_prompt(4, {{"stop", {"ok", "123456789"}}})), 400, "stop[1]",
                 "limit_exceeded");
  expect_refused(post(server, kC, ids_prompt(4, {{"stop", "123456789"}})), 400, "stop", "limit_exceeded");
  EXPECT_EQ(post(server, kC, ids_prompt(4, {{"stop_token_ids", {1, 2}}})).status, 200);
  expect_refused(post(server, kC, ids_prompt(4, {{"stop_token_ids", {1, 2, 3}}})), 400, "stop_token_ids",
                 "limit_exceeded");
  // Still serving, and the refusals are counted.
  EXPECT_EQ(send(server, "GET", "/health").status, 200);
  EXPECT_EQ(post(server, kC, ids_prompt(3)).status, 200);
  EXPECT_EQ(
      metric_value(send(server, "GET", "/metrics").raw,
                   "tpserve:requests_refused_total{model_name=\"synthetic-tiny\",reason=\"limit_exceeded\"}"),
      8);
}

double metric(const TestServer& server, const std::string& sample) {
  return metric_value(send(server, "GET", "/metrics").raw, sample);
}

// Waits (up to 60 s) until the gauge tpserve:<name> reads `value`.
bool wait_for_gauge(const TestServer& server, const std::string& name, double value) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (metric(server, "tpserve:" + name + "{model_name=\"synthetic-tiny\"}") == value) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

TEST(HttpLimits, AFullQueueGets503AndServingGoesOn) {
  // One sequence runs at a time and one may wait: the third concurrent request is refused.
  TestServer server({"runtime.max_batch=1", "runtime.max_seq_len=4096", "server.max_queued_requests=1"},
                    /*with_tokenizer=*/false);
  RawSocket running(server.port());  // a long streaming request, ended below by hanging up
  const std::string long_body =
      ids_prompt(3, {{"max_tokens", 4000}, {"ignore_eos", true}, {"stream", true}}).dump();
  ASSERT_TRUE(
      running.send("POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                   "Content-Length: " +
                   std::to_string(long_body.size()) + "\r\n\r\n" + long_body));
  ASSERT_TRUE(wait_for_gauge(server, "num_requests_running", 1));
  Reply waiting;
  std::thread waiter([&] { waiting = post(server, kC, ids_prompt(3)); });
  ASSERT_TRUE(wait_for_gauge(server, "num_requests_waiting", 1));

  auto cli = server.client();
  const auto refused = cli->Post(kC.c_str(), ids_prompt(3).dump(), "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(refused->get_header_value("Retry-After"), "1");
  const Json error = Json::parse(refused->body);
  EXPECT_EQ(error["error"]["code"], "server_overloaded") << refused->body;
  EXPECT_EQ(error["error"]["type"], "service_unavailable_error");

  running.close();  // its client goes away: aborted, and the waiting request runs
  waiter.join();
  EXPECT_EQ(waiting.status, 200) << waiting.raw;
  EXPECT_EQ(post(server, kC, ids_prompt(3)).status, 200);
  EXPECT_EQ(
      metric(server,
             "tpserve:requests_refused_total{model_name=\"synthetic-tiny\",reason=\"server_overloaded\"}"),
      1);
}

// A burst into an idle server: the jobs the next step takes into free places of the batch do not count as
// waiting (max_batch 4 + 2 queued are accepted before the loop has run a step; the seventh is refused), and
// every accepted job runs to its end.
TEST(HttpLimits, FreePlacesOfTheBatchDoNotCountAsQueued) {
  auto comm = parallel::make_single_rank_communicator();
  Engine engine(load_config_file(std::string(TPSERVE_SOURCE_DIR) + "/configs/tiny.yaml",
                                 {"runtime.backend=cpu", "runtime.max_batch=4"}),
                *comm, make_cpu_backend());
  ServerMetrics metrics;
  EngineLoop loop(engine, nullptr, metrics, /*max_waiting=*/2);
  std::vector<std::shared_ptr<RequestStream>> accepted;
  for (int i = 0; i < 6; ++i) {
    GenerationJob job;
    job.prompt = {1, 2, 3};
    job.max_tokens = 2;
    const Submission s = loop.submit(std::move(job));
    ASSERT_EQ(s.refusal, Submission::Refusal::kNone) << "job " << i;
    accepted.push_back(s.stream);
  }
  GenerationJob one_more;
  one_more.prompt = {1, 2, 3};
  EXPECT_EQ(loop.submit(std::move(one_more)).refusal, Submission::Refusal::kQueueFull);
  loop.drain();
  loop.run();  // admits the six, runs them to their end, then returns (draining)
  for (const auto& stream : accepted) {
    bool finished = false;
    for (StreamUpdate u; !finished && stream->next(u, std::chrono::milliseconds(0));) finished = u.finished;
    EXPECT_TRUE(finished);
  }
}

// server.threads auto (0) leaves threads beyond every running and waiting request: with both full, a probe
// and a refusal are still answered at once (a fixed number of threads below them made /health wait for a
// generation to end, and made server_overloaded unreachable).
TEST(HttpLimits, AutoThreadsAnswerProbesWhileEveryRequestSlotIsHeld) {
  TestServer server(
      {"server.threads=0", "runtime.max_batch=2", "runtime.max_seq_len=4096", "server.max_queued_requests=2"},
      /*with_tokenizer=*/false);
  EXPECT_EQ(server.config().server.threads, 2 + 2 + kAutoThreadsSpare);
  const std::string long_body =
      ids_prompt(3, {{"max_tokens", 4000}, {"ignore_eos", true}, {"stream", true}}).dump();
  std::vector<std::unique_ptr<RawSocket>> held;  // 2 running and 2 waiting, each holding a thread
  for (const char* gauge : {"num_requests_running", "num_requests_waiting"}) {
    for (int i = 0; i < 2; ++i) {
      held.push_back(std::make_unique<RawSocket>(server.port()));
      ASSERT_TRUE(held.back()->send(
          "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: " +
          std::to_string(long_body.size()) + "\r\n\r\n" + long_body));
    }
    ASSERT_TRUE(wait_for_gauge(server, gauge, 2));
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(send(server, "GET", "/health").status, 200);
  expect_refused(post(server, kC, ids_prompt(3)), 503, "", "server_overloaded");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  for (auto& socket : held) socket->close();
}

// A request of n choices takes n places in the queue: more than the queue holds is a 400; choices that do not
// all fit beside what already waits are refused as a whole (those already queued are cancelled), and serving
// goes on.
TEST(HttpLimits, ChoicesCountInTheQueue) {
  TestServer server({"runtime.max_batch=1", "runtime.max_seq_len=4096", "server.max_queued_requests=2"},
                    /*with_tokenizer=*/false);
  expect_refused(post(server, kC, ids_prompt(3, {{"n", 3}})), 400, "n", "limit_exceeded");
  const std::string long_body =
      ids_prompt(3, {{"max_tokens", 4000}, {"ignore_eos", true}, {"stream", true}}).dump();
  std::vector<std::unique_ptr<RawSocket>> held;  // one running, one waiting
  for (const char* gauge : {"num_requests_running", "num_requests_waiting"}) {
    held.push_back(std::make_unique<RawSocket>(server.port()));
    ASSERT_TRUE(held.back()->send(
        "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: " +
        std::to_string(long_body.size()) + "\r\n\r\n" + long_body));
    ASSERT_TRUE(wait_for_gauge(server, gauge, 1));
  }
  // Two choices, one place left: refused, and its first choice taken back out of the queue.
  expect_refused(post(server, kC, ids_prompt(3, {{"n", 2}})), 503, "", "server_overloaded");
  ASSERT_TRUE(wait_for_gauge(server, "num_requests_waiting", 1));
  for (auto& socket : held) socket->close();
  ASSERT_TRUE(wait_for_gauge(server, "num_requests_running", 0));
  const Reply ok = post(server, kC, ids_prompt(3, {{"n", 2}}));
  EXPECT_EQ(ok.status, 200) << ok.raw;
  EXPECT_EQ(ok.body["choices"].size(), 2u);
}

TEST(HttpLimits, ChatPromptsAndMaxCompletionTokensAreLimitedToo) {
  SKIP_WITHOUT_TOKENIZER();
  TestServer server({"server.max_prompt_tokens=20", "server.max_output_tokens=4"});
  const Json short_chat = {{{"role", "user"}, {"content", "hi"}}};
  const Json long_chat = {
      {{"role", "user"},
       {"content", "a question that takes many more than twenty tokens: " + std::string(200, 'x')}}};
  EXPECT_EQ(post(server, kChat, {{"messages", short_chat}, {"max_completion_tokens", 4}}).status, 200);
  expect_refused(post(server, kChat, {{"messages", long_chat}, {"max_tokens", 2}}), 400, "messages",
                 "limit_exceeded");
  expect_refused(post(server, kChat, {{"messages", short_chat}, {"max_completion_tokens", 5}}), 400,
                 "max_completion_tokens", "limit_exceeded");
  expect_refused(post(server, kChat, {{"messages", short_chat}, {"max_tokens", 5}}), 400, "max_tokens",
                 "limit_exceeded");
  EXPECT_EQ(post(server, kChat, {{"messages", short_chat}, {"max_tokens", 3}}).status, 200);
}

}  // namespace
}  // namespace tpserve::serve::testing
