// Connection handling: clients that connect and send nothing hold no worker thread and do not delay anyone
// (more of them than server.threads), are closed after server.idle_timeout_s; a request that arrives too
// slowly gets 408 after server.request_timeout_s; a connection over server.max_connections gets 503 at once;
// after each of these the server goes on serving. And the stream under it: write timeout, read deadline.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/serve/http_connection.h"
#include "tests/serve/raw_socket.h"
#include "tests/serve/test_server.h"

namespace tpserve::serve::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const std::string kLabel = "{model_name=\"synthetic-tiny\"";

Json tiny_request() {
  return {{"prompt", {9707, 11, 1879}}, {"max_tokens", 2}, {"temperature", 0}};
}

// Sends until the server answers 200 (5 s at most): a connection whose close the server has not seen yet
// still counts against server.max_connections for a moment.
Reply until_answered(const std::function<Reply()>& request) {
  Reply r;
  for (int i = 0; i < 100 && r.status != 200; ++i) {
    r = request();
    if (r.status != 200) std::this_thread::sleep_for(milliseconds(50));
  }
  return r;
}

double refused(const TestServer& server, const std::string& reason) {
  return metric_value(until_answered([&] { return send(server, "GET", "/metrics"); }).raw,
                      "tpserve:requests_refused_total" + kLabel + ",reason=\"" + reason + "\"}");
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST(HttpConnections, SilentClientsDoNotBlockOthers) {
  // Two request threads and eight connections that send nothing: in a thread-per-connection server they
  // would hold both threads until their idle timeout (60 s here).
  TestServer server({"server.threads=2", "server.idle_timeout_s=60"}, /*with_tokenizer=*/false);
  std::vector<std::unique_ptr<RawSocket>> silent;
  for (int i = 0; i < 8; ++i) {
    silent.push_back(std::make_unique<RawSocket>(server.port()));
    ASSERT_TRUE(silent.back()->connected());
  }
  const auto start = Clock::now();
  for (int i = 0; i < 4; ++i) {
    const Reply r = post(server, "/v1/completions", tiny_request());
    ASSERT_EQ(r.status, 200) << r.raw;
  }
  std::vector<std::thread> clients;
  std::vector<int> statuses(4);
  for (int i = 0; i < 4; ++i)
    clients.emplace_back([&, i] { statuses[i] = post(server, "/v1/completions", tiny_request()).status; });
  for (auto& t : clients) t.join();
  for (int s : statuses) EXPECT_EQ(s, 200);
  EXPECT_LT(seconds_since(start), 20) << "requests waited behind the silent connections";
  // The silent connections are still open (their timeout is far away), and counted.
  const std::string page = send(server, "GET", "/metrics").raw;
  EXPECT_GE(metric_value(page, "tpserve:http_connections_open" + kLabel + "}"), 8) << page;
  for (auto& s : silent) EXPECT_FALSE(s->closed_by_server());
}

TEST(HttpConnections, IdleConnectionsAreClosedAfterTheIdleTimeout) {
  TestServer server({"server.idle_timeout_s=0.5"}, /*with_tokenizer=*/false);
  RawSocket silent(server.port());
  ASSERT_TRUE(silent.connected());
  const auto start = Clock::now();
  const std::string got = silent.read_until_closed(milliseconds(10000));
  EXPECT_TRUE(silent.closed()) << "still open after 10 s";
  EXPECT_EQ(got, "") << "an idle connection is closed without an answer";
  EXPECT_GE(seconds_since(start), 0.4);
  EXPECT_LT(seconds_since(start), 5.0);

  // A keep-alive connection between requests: served, then closed once idle.
  RawSocket keep_alive(server.port());
  const std::string body = tiny_request().dump();
  ASSERT_TRUE(
      keep_alive.send("POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                      "Content-Length: " +
                      std::to_string(body.size()) + "\r\n\r\n" + body));
  const std::string answer = keep_alive.read_until_closed(milliseconds(10000));
  EXPECT_EQ(status_of(answer), 200) << answer;
  EXPECT_TRUE(keep_alive.closed());
  EXPECT_EQ(post(server, "/v1/completions", tiny_request()).status, 200);
}

TEST(HttpConnections, RequestsThatArriveTooSlowlyGet408) {
  TestServer server({"server.request_timeout_s=1", "server.idle_timeout_s=30"}, /*with_tokenizer=*/false);
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n";
  // Stalls in the request line, in the headers, and in the body.
  const std::vector<std::string> partial = {"POST /v1/compl", head,
                                            head + "Content-Length: 100\r\n\r\n{\"prompt\": [1, 2"};
  for (const std::string& bytes : partial) {
    SCOPED_TRACE(bytes);
    RawSocket slow(server.port());
    ASSERT_TRUE(slow.send(bytes));
    const auto start = Clock::now();
    const std::string answer = slow.read_until_closed(milliseconds(10000));
    EXPECT_EQ(status_of(answer), 408) << answer;
    const Json error = Json::parse(body_of(answer), nullptr, false);
    ASSERT_TRUE(error.is_object()) << answer;
    EXPECT_EQ(error["error"]["code"], "request_timeout") << answer;
    EXPECT_TRUE(slow.closed()) << "the connection stays open after a 408";
    EXPECT_GE(seconds_since(start), 0.8);
    EXPECT_LT(seconds_since(start), 8.0);
  }
  EXPECT_EQ(refused(server, "request_timeout"), 3);
  EXPECT_EQ(post(server, "/v1/completions", tiny_request()).status, 200);
}

TEST(HttpConnections, OneConnectionOverTheLimitGets503AtOnce) {
  TestServer server({"server.max_connections=4", "server.idle_timeout_s=60"}, /*with_tokenizer=*/false);
  std::vector<std::unique_ptr<RawSocket>> held;
  for (int i = 0; i < 4; ++i) held.push_back(std::make_unique<RawSocket>(server.port()));
  // Accepted in order: the fifth connection is over the limit.
  const auto start = Clock::now();
  auto cli = server.client();
  const auto r = cli->Get("/health");
  ASSERT_TRUE(r) << "no answer at all";
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(Json::parse(r->body)["error"]["code"], "too_many_connections") << r->body;
  EXPECT_LT(seconds_since(start), 5.0);
  for (auto& s : held) EXPECT_FALSE(s->closed_by_server()) << "a connection within the limit was closed";
  // A slot frees when a client hangs up: serving goes on.
  held.pop_back();
  EXPECT_EQ(until_answered([&] { return post(server, "/v1/completions", tiny_request()); }).status, 200);
  EXPECT_GE(refused(server, "too_many_connections"), 1);
}

// The stream under the server, over a socket pair (fixed buffers, unlike loopback TCP, whose buffers grow
// past anything the tiny model can write in a test): writes to a client that reads nothing give up after the
// write timeout, reads give up at the request's deadline (and say so), bytes read past a request are kept
// for the next one, and a peer that closes is seen.
struct SocketPair {
  SocketPair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL, 0) | O_NONBLOCK);
    server = std::make_unique<HttpConnection>(fds[0], &open);
    client = fds[1];
  }
  ~SocketPair() {
    if (client >= 0) ::close(client);
  }
  std::atomic<int> open{0};
  std::unique_ptr<HttpConnection> server;
  int client = -1;
};

TEST(HttpConnectionStream, WritesToAClientThatReadsNothingGiveUpAfterTheWriteTimeout) {
  SocketPair pair;
  EXPECT_EQ(pair.open, 1);
  HttpConnectionStream stream(*pair.server, Clock::now() + std::chrono::seconds(60), milliseconds(300));
  const std::string chunk(64 * 1024, 'x');
  const auto start = Clock::now();
  ssize_t n = 0;
  size_t written = 0;
  while ((n = stream.write(chunk.data(), chunk.size())) > 0 && written < (1u << 30)) written += n;
  EXPECT_EQ(n, -1) << "wrote " << written << " bytes to a client that reads nothing";
  EXPECT_GE(seconds_since(start), 0.25);
  EXPECT_LT(seconds_since(start), 10.0);
  EXPECT_FALSE(stream.timed_out()) << "a write timeout is not a request timeout";
  EXPECT_EQ(stream.bytes_written(), written);
  pair.server.reset();
  EXPECT_EQ(pair.open, 0) << "the connection is uncounted when it closes";
}

TEST(HttpConnectionStream, ReadsStopAtTheDeadlineAndKeepWhatFollowsTheRequest) {
  SocketPair pair;
  const std::string bytes = "GET / HTTP/1.1\r\n\r\nGET /next";
  ASSERT_EQ(::send(pair.client, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  HttpConnectionStream stream(*pair.server, Clock::now() + milliseconds(300), milliseconds(1000));
  char c;
  std::string line;
  while (line.find("\r\n\r\n") == std::string::npos && stream.read(&c, 1) == 1) line += c;
  EXPECT_EQ(line, "GET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(pair.server->read_ahead(), "GET /next") << "bytes of the next request were lost";
  char buffer[64];
  EXPECT_EQ(stream.read(buffer, sizeof(buffer)), 9);
  const auto start = Clock::now();
  EXPECT_EQ(stream.read(buffer, sizeof(buffer)), -1);  // nothing more comes
  EXPECT_TRUE(stream.timed_out());
  EXPECT_GE(seconds_since(start), 0.2);
  EXPECT_FALSE(pair.server->peer_closed());
  ::close(pair.client);
  pair.client = -1;
  EXPECT_TRUE(pair.server->peer_closed());
}

}  // namespace
}  // namespace tpserve::serve::testing
