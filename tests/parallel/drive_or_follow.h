// Multi-rank engine tests: the driver (rank 0) runs the test's steps while the followers serve them; the
// followers are released when the driver is done, also when it throws or a check fails.
#pragma once

#include <utility>

#include "runtime/engine/engine.h"

namespace tpserve::testing_util {

template <class Drive>
void drive_or_follow(Engine& engine, Drive&& drive) {
  if (!engine.is_driver()) {
    engine.run_follower();
    return;
  }
  struct StopGuard {
    Engine& e;
    ~StopGuard() { e.stop_followers(); }
  } guard{engine};
  std::forward<Drive>(drive)();
}

}  // namespace tpserve::testing_util
