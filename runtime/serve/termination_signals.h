// TerminationSignals: graceful shutdown on SIGTERM and SIGINT. The signal handler only writes a byte to a
// pipe (async-signal-safe, whichever thread, MPI's own included, receives the signal); a watcher thread
// reads it and runs the action (stop accepting, drain). A second signal ends the process at once.
// ignore_termination_signals() is for the follower ranks, which stop when rank 0 tells them to.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

namespace tpserve::serve {

class TerminationSignals {
 public:
  TerminationSignals();   // installs the handlers (one instance per process)
  ~TerminationSignals();  // restores the default handlers and joins the watcher
  TerminationSignals(const TerminationSignals&) = delete;
  TerminationSignals& operator=(const TerminationSignals&) = delete;

  // Runs `action` on the watcher thread at the first signal, or now if one already came.
  void on_first_signal(std::function<void()> action);
  bool received() const { return received_.load(); }

 private:
  void watch();

  int pipe_[2] = {-1, -1};
  std::thread watcher_;
  std::mutex mutex_;
  std::function<void()> action_;
  std::atomic<bool> received_{false};
};

void ignore_termination_signals();

}  // namespace tpserve::serve
