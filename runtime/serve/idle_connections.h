// IdleConnections: the HTTP connections on which no request is being handled, watched by one poll()
// thread so that they hold no worker thread. A parked connection is handed back (on_request) as soon as
// bytes of a request arrive, and closed when its deadline passes first (a client that opens a connection
// and sends nothing) or when the client closes it. A lingering connection has been sent a final answer and
// had its sending side shut: its input is read and dropped until the client closes or a short grace period
// ends, so that closing never resets the connection before the client has read that answer.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/serve/http_connection.h"

namespace tpserve::serve {

class IdleConnections {
 public:
  using OnRequest = std::function<void(std::unique_ptr<HttpConnection>)>;
  // max_lingering: lingering connections kept at once; beyond it they are closed at once.
  IdleConnections(OnRequest on_request, int max_lingering);
  ~IdleConnections();
  IdleConnections(const IdleConnections&) = delete;
  IdleConnections& operator=(const IdleConnections&) = delete;

  void start();
  // Closes every connection held and joins the thread.
  void stop();

  void park(std::unique_ptr<HttpConnection> connection, SteadyClock::time_point deadline);
  void linger(std::unique_ptr<HttpConnection> connection);

 private:
  struct Entry {
    std::unique_ptr<HttpConnection> connection;
    SteadyClock::time_point deadline;
    bool lingering = false;
  };
  void add(Entry entry);
  void run();
  // One poll() round over `held`; returns the entries still held.
  void poll_once(std::vector<Entry>& held);

  OnRequest on_request_;
  const int max_lingering_;
  std::atomic<int> lingering_{0};
  int wake_[2] = {-1, -1};  // a pipe: add() and stop() wake the poll
  std::mutex mutex_;
  std::vector<Entry> incoming_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tpserve::serve
