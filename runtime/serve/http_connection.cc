#include "runtime/serve/http_connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tpserve::serve {
namespace {

constexpr size_t kReadChunk = 4096;  // reads are buffered: httplib reads the request head a byte at a time

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  const int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                      : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return;
  char host[NI_MAXHOST];
  char service[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), service, sizeof(service),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return;
  ip = host;
  port = std::atoi(service);
}

}  // namespace

HttpConnection::HttpConnection(int fd, std::atomic<int>* open_count) : fd_(fd), open_count_(open_count) {
  if (open_count_ != nullptr) open_count_->fetch_add(1);
}

HttpConnection::~HttpConnection() {
  ::close(fd_);
  if (open_count_ != nullptr) open_count_->fetch_sub(1);
}

bool HttpConnection::closed_with_nothing_to_read() const {
  if (!read_ahead_.empty()) return false;
  char byte;
  const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;
  if (n == 0) return true;
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

bool HttpConnection::peer_closed() const {
  // POLLRDHUP: the peer's FIN has arrived, whether or not bytes it sent before it (a stray CRLF, a
  // pipelined request) are still unread; peeking at the next byte would see those bytes instead.
  pollfd p{fd_, POLLRDHUP, 0};
  const int rc = ::poll(&p, 1, 0);
  return rc > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void HttpConnection::end_writing() {
  ::shutdown(fd_, SHUT_WR);
}

void HttpConnection::send_final(const std::string& bytes) {
  (void)::send(fd_, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::shutdown(fd_, SHUT_WR);
}

HttpConnectionStream::HttpConnectionStream(HttpConnection& connection, SteadyClock::time_point read_deadline,
                                           std::chrono::milliseconds write_timeout)
    : connection_(connection), read_deadline_(read_deadline), write_timeout_(write_timeout) {}

bool HttpConnectionStream::wait(short events, SteadyClock::time_point deadline) const {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now());
    pollfd p{connection_.fd(), events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return false;
    if (rc == 0 && SteadyClock::now() >= deadline) return false;  // poll may wake a little early: wait on
  }
}

bool HttpConnectionStream::is_readable() const {
  if (!connection_.read_ahead().empty()) return true;
  if (wait(POLLIN, read_deadline_)) return true;
  if (SteadyClock::now() >= read_deadline_) timed_out_ = true;
  return false;
}

bool HttpConnectionStream::is_writable() const {
  return wait(POLLOUT, SteadyClock::now() + write_timeout_) && !connection_.peer_closed();
}

ssize_t HttpConnectionStream::read(char* ptr, size_t size) {
  std::string& ahead = connection_.read_ahead();
  for (;;) {
    if (!ahead.empty()) {
      const size_t n = std::min(size, ahead.size());
      std::memcpy(ptr, ahead.data(), n);
      ahead.erase(0, n);
      return static_cast<ssize_t>(n);
    }
    if (!is_readable()) return -1;
    char chunk[kReadChunk];
    const bool direct = size >= kReadChunk;
    const ssize_t n = ::recv(connection_.fd(), direct ? ptr : chunk, direct ? size : kReadChunk, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (n <= 0 || direct) return n;
    ahead.assign(chunk, static_cast<size_t>(n));
  }
}

ssize_t HttpConnectionStream::write(const char* ptr, size_t size) {
  for (;;) {
    const ssize_t n = ::send(connection_.fd(), ptr, size, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      bytes_written_ += static_cast<size_t>(n);
      return n;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    if (!wait(POLLOUT, SteadyClock::now() + write_timeout_)) return -1;
  }
}

void HttpConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  address_of(connection_.fd(), true, ip, port);
}

void HttpConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  address_of(connection_.fd(), false, ip, port);
}

}  // namespace tpserve::serve
