#include "runtime/serve/termination_signals.h"

#include <unistd.h>

#include <csignal>
#include <cstring>

#include "common/error.h"
#include "common/log.h"

namespace tpserve::serve {
namespace {

int g_signal_pipe = -1;
std::atomic<int> g_signal_count{0};

extern "C" void on_termination_signal(int signal) {
  if (g_signal_count.fetch_add(1) >= 1) {
    static const char kMessage[] = "tpserve: second termination signal, exiting now\n";
    [[maybe_unused]] ssize_t n = write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
    _exit(128 + signal);
  }
  const char byte = static_cast<char>(signal);
  [[maybe_unused]] ssize_t n = write(g_signal_pipe, &byte, 1);
}

void install(void (*handler)(int)) {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

}  // namespace

TerminationSignals::TerminationSignals() {
  TPS_CHECK(pipe(pipe_) == 0, "signals: pipe() failed: ", std::strerror(errno));
  g_signal_pipe = pipe_[1];
  g_signal_count = 0;
  install(on_termination_signal);
  watcher_ = std::thread([this] { watch(); });
}

TerminationSignals::~TerminationSignals() {
  install(SIG_DFL);
  const char quit = 0;  // not a signal number: tells the watcher to return
  [[maybe_unused]] ssize_t n = write(pipe_[1], &quit, 1);
  watcher_.join();
  close(pipe_[0]);
  close(pipe_[1]);
  g_signal_pipe = -1;
}

void TerminationSignals::on_first_signal(std::function<void()> action) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (received_) {
    action();
    return;
  }
  action_ = std::move(action);
}

void TerminationSignals::watch() {
  for (;;) {
    char byte = 0;
    const ssize_t n = read(pipe_[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || byte == 0) return;
    log_info("received ", byte == SIGTERM ? "SIGTERM" : "SIGINT",
             ": no new requests; finishing the running ones (a second signal exits at once)");
    std::lock_guard<std::mutex> lock(mutex_);
    received_ = true;
    if (action_) action_();
  }
}

void ignore_termination_signals() {
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGINT, SIG_IGN);
}

}  // namespace tpserve::serve
