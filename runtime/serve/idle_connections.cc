#include "runtime/serve/idle_connections.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace tpserve::serve {
namespace {

constexpr auto kLingerGrace = std::chrono::seconds(2);
constexpr auto kMaxPollWait = std::chrono::seconds(1);

// Reads and drops what the client sent; false once it has closed (or the socket failed).
bool discard_input(int fd) {
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

}  // namespace

IdleConnections::IdleConnections(OnRequest on_request, int max_lingering)
    : on_request_(std::move(on_request)), max_lingering_(max_lingering) {
  TPS_CHECK(::pipe2(wake_, O_NONBLOCK | O_CLOEXEC) == 0,
            "server: cannot create a pipe: ", std::strerror(errno));
}

IdleConnections::~IdleConnections() {
  stop();
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void IdleConnections::start() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { run(); });
}

void IdleConnections::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  const char byte = 0;
  (void)::write(wake_[1], &byte, 1);
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  incoming_.clear();
  lingering_ = 0;
}

void IdleConnections::park(std::unique_ptr<HttpConnection> connection, SteadyClock::time_point deadline) {
  add({std::move(connection), deadline, false});
}

void IdleConnections::linger(std::unique_ptr<HttpConnection> connection) {
  if (lingering_.fetch_add(1) >= max_lingering_) {
    lingering_.fetch_sub(1);
    return;  // closed now: a flood of refused connections must not pile up
  }
  add({std::move(connection), SteadyClock::now() + kLingerGrace, true});
}

void IdleConnections::add(Entry entry) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      if (entry.lingering) lingering_.fetch_sub(1);
      return;  // the connection closes here
    }
    incoming_.push_back(std::move(entry));
  }
  const char byte = 0;
  (void)::write(wake_[1], &byte, 1);
}

void IdleConnections::run() {
  std::vector<Entry> held;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) break;
      for (Entry& e : incoming_) held.push_back(std::move(e));
      incoming_.clear();
    }
    poll_once(held);
  }
}  // `held` goes out of scope: every connection still held is closed

void IdleConnections::poll_once(std::vector<Entry>& held) {
  std::vector<pollfd> fds{{wake_[0], POLLIN, 0}};
  const auto now = SteadyClock::now();
  auto next = now + kMaxPollWait;
  for (const Entry& e : held) {
    fds.push_back({e.connection->fd(), POLLIN, 0});
    next = std::min(next, e.deadline);
  }
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - now);
  const int rc = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(wait.count(), 0)));
  if (rc < 0) return;  // EINTR: next round
  if (fds[0].revents != 0) {
    char drain[64];
    while (::read(wake_[0], drain, sizeof(drain)) > 0) {
    }
  }
  const auto after = SteadyClock::now();
  std::vector<Entry> kept;
  for (size_t i = 0; i < held.size(); ++i) {
    Entry& e = held[i];
    bool keep = false;
    if (fds[i + 1].revents != 0) {
      if (e.lingering)
        keep = discard_input(e.connection->fd()) && after < e.deadline;
      else if (!e.connection->closed_with_nothing_to_read())
        on_request_(std::move(e.connection));  // bytes of a request: a worker takes it from here
    } else {
      keep = after < e.deadline;
    }
    if (keep)
      kept.push_back(std::move(e));
    else if (e.lingering)
      lingering_.fetch_sub(1);
  }
  held.swap(kept);
}

}  // namespace tpserve::serve
