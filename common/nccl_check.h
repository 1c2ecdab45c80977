// NCCL_CHECK(call): throws tpserve::Error with the call text, NCCL's error string (and last error), file,
// line.
#pragma once

#include <nccl.h>

#include <string>

#include "common/error.h"

namespace tpserve {
inline std::string nccl_error_text(ncclResult_t r, ncclComm_t comm = nullptr) {
  std::string text = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') text += std::string(" (") + last + ")";
  return text;
}
}  // namespace tpserve

#define NCCL_CHECK(call)                                                                          \
  do {                                                                                            \
    const ncclResult_t tps_nccl_rc_ = (call);                                                     \
    if (tps_nccl_rc_ != ncclSuccess)                                                              \
      ::tpserve::fail_check(#call, ::tpserve::nccl_error_text(tps_nccl_rc_), __FILE__, __LINE__); \
  } while (0)
