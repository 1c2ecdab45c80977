// ConnectionServer: httplib::Server with bounded connection handling. cpp-httplib 0.11 gives each accepted
// connection a worker thread from an unbounded queue for as long as the connection is open, so a few
// clients that connect and send nothing (or keep idle keep-alive connections) stall everyone else. Here:
// - the accept thread counts connections and answers one over `max_connections` with 503 at once;
// - a connection waits for its next request in IdleConnections (one poll thread, no worker), and is closed
//   after `idle_timeout` without one;
// - a worker (`threads` of them) takes a connection once bytes of a request arrive, reads the request with a
//   deadline (`request_timeout` from its first byte: else 408), runs the handler, writes the answer (each
//   write waits at most `write_timeout`) and parks the connection again.
// Request parsing, routing and handlers stay httplib's (Server::process_request).
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/serve/http_connection.h"
#include "runtime/serve/idle_connections.h"

namespace tpserve::serve {

struct ConnectionLimits {
  int threads = 64;
  int max_connections = 256;
  std::chrono::milliseconds idle_timeout{10000};
  std::chrono::milliseconds request_timeout{30000};
  std::chrono::milliseconds write_timeout{30000};
};

class ConnectionServer : public httplib::Server {
 public:
  // on_refused(code): a connection was refused ("too_many_connections") or a request timed out
  // ("request_timeout"); for metrics.
  ConnectionServer(ConnectionLimits limits, std::function<void(const char* code)> on_refused);
  ~ConnectionServer() override;

  // A connection is closed after this many requests (announced in the Keep-Alive header).
  static constexpr int kMaxRequestsPerConnection = 1000;

  // After binding: a listen backlog that absorbs a burst of connections (httplib's is 5).
  void raise_listen_backlog();
  int open_connections() const { return open_.load(); }

  // For the handler running on this thread: whether its request's arrival ran past the request timeout
  // (httplib then answers 400; the error handler turns it into 408), and whether its client went away.
  static bool request_timed_out();
  static bool client_gone();
  // Close the connection after this thread's answer (sent with Connection: close).
  static void close_after_answer();
  // The message of a 408 answer.
  std::string request_timeout_message() const;

 private:
  class InlineQueue;
  // Called by httplib's accept loop (through InlineQueue, on the accept thread) for each new socket.
  bool process_and_close_socket(int sock) override;
  void start_workers();
  void stop_workers();
  void enqueue_ready(std::unique_ptr<HttpConnection> connection);
  void worker();
  void serve(std::unique_ptr<HttpConnection> connection);
  // A final answer without a worker: status line, JSON body, Connection: close; then a lingering close.
  void answer_and_close(std::unique_ptr<HttpConnection> connection, int status, const std::string& message,
                        const char* code);

  const ConnectionLimits limits_;
  std::function<void(const char*)> on_refused_;
  std::atomic<int> open_{0};
  IdleConnections idle_;

  std::mutex mutex_;
  std::condition_variable ready_cv_;
  std::deque<std::unique_ptr<HttpConnection>> ready_;  // a request has started arriving on each
  bool stopping_ = false;
  std::atomic<bool> closing_{false};  // answers carry Connection: close
  std::vector<std::thread> workers_;
};

}  // namespace tpserve::serve
