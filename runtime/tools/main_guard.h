// The top level of every tpserve program: runs main's body, and on an exception logs it with the rank and
// brings every rank down (MPI_Abort) instead of leaving one waiting in a collective. Config errors exit 2.
#pragma once

#include <functional>

namespace tpserve {

inline constexpr int kExitConfigError = 2;

int run_guarded(const std::function<int()>& body);

}  // namespace tpserve
