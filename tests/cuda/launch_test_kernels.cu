#include "kernels/pdl.cuh"
#include "tests/cuda/launch_test_kernels.h"

namespace tpserve::launch_test {
namespace {

__global__ void enrolled_write(int* out, int value) {
  kernels::pdl_wait();
  *out = value;
  kernels::pdl_trigger();
}

__global__ void unenrolled_write(int* out, int value) {
  *out = value;
}

}  // namespace

void launch_enrolled(const kernels::LaunchPolicy& policy, kernels::Site site, cudaStream_t stream, int* out,
                     int value) {
  kernels::launch(policy, site, kernels::Pdl::kEnrolled, enrolled_write, dim3(1), dim3(1), 0, stream, out,
                  value);
}

void launch_unenrolled(const kernels::LaunchPolicy& policy, kernels::Site site, cudaStream_t stream, int* out,
                       int value) {
  kernels::launch(policy, site, kernels::Pdl::kNever, unenrolled_write, dim3(1), dim3(1), 0, stream, out,
                  value);
}

const void* enrolled_kernel() {
  return reinterpret_cast<const void*>(enrolled_write);
}
const void* unenrolled_kernel() {
  return reinterpret_cast<const void*>(unenrolled_write);
}

}  // namespace tpserve::launch_test
