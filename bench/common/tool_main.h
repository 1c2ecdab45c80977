// The main() of a single-process benchmark tool: runs it and turns an escaped exception into one line on
// stderr and exit status 1 (multi-rank tools use runtime/tools/main_guard.h, which also aborts every rank).
#pragma once

#include <cstdio>
#include <exception>

namespace tpserve::bench {

template <class Run>
int tool_main(const char* tool, Run&& run) {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", tool, e.what());
    return 1;
  }
}

}  // namespace tpserve::bench
