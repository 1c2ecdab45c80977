// Errors: one exception type and one reporter for every failed check in tpserve.
//
// Library code never calls exit(): a failed check throws tpserve::Error carrying the statement text, the
// file and the line. The CUDA, cuBLASLt, NCCL and MPI forms (common/cuda_check.h, common/mpi_check.h,
// common/nccl_check.h) are one line each on top of fail_check(). The top level (runtime/tools) catches,
// logs and brings every rank down with MPI_Abort.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace tpserve {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Builds "what: detail (at file:line)" and throws Error.
[[noreturn]] void fail_check(const char* what, const std::string& detail, const char* file, int line);

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace tpserve

// TPS_CHECK(cond, message parts...): throws tpserve::Error naming the condition when it is false.
#define TPS_CHECK(cond, ...)                                                                               \
  do {                                                                                                     \
    if (!(cond)) ::tpserve::fail_check(#cond, ::tpserve::detail::concat(__VA_ARGS__), __FILE__, __LINE__); \
  } while (0)

// TPS_THROW(message parts...): throws tpserve::Error with the message, file and line.
#define TPS_THROW(...) \
  ::tpserve::fail_check(nullptr, ::tpserve::detail::concat(__VA_ARGS__), __FILE__, __LINE__)
