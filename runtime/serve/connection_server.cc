#include "runtime/serve/connection_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <sstream>

#include "common/error.h"
#include "common/log.h"
#include "runtime/serve/api_error.h"

namespace tpserve::serve {
namespace {

thread_local const HttpConnectionStream* t_stream = nullptr;  // the request this worker thread handles

const char* reason_phrase(int status) {
  switch (status) {
    case 408:
      return "Request Timeout";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

}  // namespace

// httplib hands each accepted socket to a TaskQueue. This one runs the task at once on the accept thread:
// process_and_close_socket() only counts and parks the connection, so accepting never waits for a worker.
class ConnectionServer::InlineQueue : public httplib::TaskQueue {
 public:
  explicit InlineQueue(ConnectionServer& server) : server_(server) { server_.start_workers(); }
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override { server_.stop_workers(); }

 private:
  ConnectionServer& server_;
};

ConnectionServer::ConnectionServer(ConnectionLimits limits, std::function<void(const char*)> on_refused)
    : limits_(limits),
      on_refused_(std::move(on_refused)),
      idle_([this](std::unique_ptr<HttpConnection> c) { enqueue_ready(std::move(c)); },
            limits.max_connections) {
  // A ServerConfig made by hand keeps threads and max_connections at 0 (auto): the config parser resolves
  // them.
  TPS_CHECK(limits.threads >= 1 && limits.max_connections >= 1, "HTTP server: ", limits.threads,
            " threads and ", limits.max_connections,
            " connections (server.threads and max_connections resolved from auto?)");
  new_task_queue = [this] { return new InlineQueue(*this); };
}

ConnectionServer::~ConnectionServer() {
  stop_workers();
}

void ConnectionServer::raise_listen_backlog() {
  // listen() on a listening socket only updates its backlog (Linux); the kernel caps it at somaxconn.
  if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, SOMAXCONN);
}

bool ConnectionServer::request_timed_out() {
  return t_stream != nullptr && t_stream->timed_out();
}

bool ConnectionServer::client_gone() {
  return t_stream != nullptr && t_stream->peer_closed();
}

void ConnectionServer::close_after_answer() {
  if (t_stream != nullptr) t_stream->request_close();
}

std::string ConnectionServer::request_timeout_message() const {
  std::ostringstream os;
  os << "the request did not arrive within server.request_timeout_s = "
     << limits_.request_timeout.count() / 1000.0 << " s of its first byte";
  return os.str();
}

bool ConnectionServer::process_and_close_socket(int sock) {
  const int flags = fcntl(sock, F_GETFL, 0);
  fcntl(sock, F_SETFL, flags | O_NONBLOCK);
  int yes = 1;
  setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  if (open_.load() >= limits_.max_connections) {
    if (on_refused_) on_refused_("too_many_connections");
    answer_and_close(std::make_unique<HttpConnection>(sock, nullptr), 503,
                     "the server has too many open connections (" + std::to_string(limits_.max_connections) +
                         "); retry later",
                     "too_many_connections");
    return false;
  }
  idle_.park(std::make_unique<HttpConnection>(sock, &open_), SteadyClock::now() + limits_.idle_timeout);
  return true;
}

void ConnectionServer::start_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = false;
  }
  closing_ = false;
  idle_.start();
  for (int i = 0; i < limits_.threads; ++i) workers_.emplace_back([this] { worker(); });
}

void ConnectionServer::stop_workers() {
  closing_ = true;
  idle_.stop();
  std::deque<std::unique_ptr<HttpConnection>> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    waiting.swap(ready_);
  }
  ready_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}  // `waiting` closes the connections no worker took

void ConnectionServer::enqueue_ready(std::unique_ptr<HttpConnection> connection) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    ready_.push_back(std::move(connection));
  }
  ready_cv_.notify_one();
}

void ConnectionServer::worker() {
  for (;;) {
    std::unique_ptr<HttpConnection> connection;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_cv_.wait(lock, [this] { return stopping_ || !ready_.empty(); });
      if (stopping_) return;
      connection = std::move(ready_.front());
      ready_.pop_front();
    }
    serve(std::move(connection));
  }
}

void ConnectionServer::serve(std::unique_ptr<HttpConnection> connection) {
  HttpConnectionStream stream(*connection, SteadyClock::now() + limits_.request_timeout,
                              limits_.write_timeout);
  bool client_closes = false;
  t_stream = &stream;
  const bool last = closing_.load() || connection->count_request() >= kMaxRequestsPerConnection;
  const bool ok = process_request(stream, last, client_closes, nullptr);
  t_stream = nullptr;
  if (stream.timed_out()) {
    if (on_refused_) on_refused_("request_timeout");
    if (stream.bytes_written() == 0)  // the request line never completed: nothing was answered yet
      answer_and_close(std::move(connection), 408, request_timeout_message(), "request_timeout");
    return;
  }
  if (stream.close_requested()) {
    // Answered before its body was read (401, 415): closing now, with the body still arriving, would reset
    // the connection and the client could lose the answer. End our side and read the rest away first.
    connection->end_writing();
    idle_.linger(std::move(connection));
    return;
  }
  if (!ok || client_closes || last) return;  // the connection closes here
  if (!connection->read_ahead().empty()) {
    enqueue_ready(std::move(connection));  // the next request is already here
    return;
  }
  idle_.park(std::move(connection), SteadyClock::now() + limits_.idle_timeout);
}

void ConnectionServer::answer_and_close(std::unique_ptr<HttpConnection> connection, int status,
                                        const std::string& message, const char* code) {
  const std::string body = ApiError(status, message, "", code).body().dump();
  std::string response =
      "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n";
  if (status == 503) response += "Retry-After: 1\r\n";
  response += "\r\n" + body;
  connection->send_final(response);
  idle_.linger(std::move(connection));
}

}  // namespace tpserve::serve
