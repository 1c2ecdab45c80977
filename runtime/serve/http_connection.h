// HttpConnection and HttpConnectionStream: one accepted TCP connection of the HTTP server, and the
// httplib::Stream that one request on it is read from and answered through. The socket is non-blocking:
// reads wait for data only until the request's deadline (a client that sends its request too slowly times
// out instead of holding a worker thread), writes wait at most the write timeout each (a client that stops
// reading is dropped). Bytes read past the end of a request stay with the connection for the next one.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>

namespace tpserve::serve {

using SteadyClock = std::chrono::steady_clock;

// Owns the socket: the destructor closes it. `open_count`, when given, counts the connection while it lives.
class HttpConnection {
 public:
  HttpConnection(int fd, std::atomic<int>* open_count);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  int fd() const { return fd_; }
  // Bytes received but not consumed yet (the start of a pipelined next request).
  std::string& read_ahead() { return read_ahead_; }
  // Nonblocking: whether the peer has closed its side (or the socket failed), bytes still unread or not.
  bool peer_closed() const;
  // Shuts the sending side (the client sees the end of the answer) and keeps reading possible.
  void end_writing();
  // Nonblocking: closed (or failed) with no byte left to read: nothing more to answer on it.
  bool closed_with_nothing_to_read() const;
  // Counts a request on this connection; returns how many there were.
  int count_request() { return ++requests_; }
  // Sends what fits into the socket buffer now (nonblocking), then closes the sending side.
  void send_final(const std::string& bytes);

 private:
  int fd_;
  std::atomic<int>* open_count_;
  std::string read_ahead_;
  int requests_ = 0;
};

class HttpConnectionStream final : public httplib::Stream {
 public:
  HttpConnectionStream(HttpConnection& connection, SteadyClock::time_point read_deadline,
                       std::chrono::milliseconds write_timeout);

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  int socket() const override { return connection_.fd(); }

  // A read gave up because the request's deadline passed.
  bool timed_out() const { return timed_out_; }
  size_t bytes_written() const { return bytes_written_; }
  bool peer_closed() const { return connection_.peer_closed(); }
  // The handler answered without reading the whole request (e.g. 401 before the body): close afterwards.
  void request_close() const { close_requested_ = true; }
  bool close_requested() const { return close_requested_; }

 private:
  // Waits for `events` until `deadline`; false on timeout or error.
  bool wait(short events, SteadyClock::time_point deadline) const;

  HttpConnection& connection_;
  SteadyClock::time_point read_deadline_;
  std::chrono::milliseconds write_timeout_;
  mutable bool timed_out_ = false;
  mutable bool close_requested_ = false;
  size_t bytes_written_ = 0;
};

}  // namespace tpserve::serve
