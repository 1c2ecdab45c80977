// MPI_CHECK(call): throws tpserve::Error with the call text, MPI's error string, file and line.
#pragma once

#include <mpi.h>

#include <string>

#include "common/error.h"

namespace tpserve {
inline std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, len);
}
}  // namespace tpserve

#define MPI_CHECK(call)                                                                           \
  do {                                                                                            \
    const int tps_mpi_rc_ = (call);                                                               \
    if (tps_mpi_rc_ != MPI_SUCCESS)                                                               \
      ::tpserve::fail_check(#call, ::tpserve::mpi_error_string(tps_mpi_rc_), __FILE__, __LINE__); \
  } while (0)
