// Row gather: one block per output row, 16-byte copies when rows are 16-byte multiples, else bytes.
#include "kernels/device_common.cuh"
#include "kernels/gather_rows.h"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"

namespace tpserve::kernels {
namespace {

constexpr int kThreads = 128;

__global__ void gather_rows_kernel(const GatherRowsParams p) {
  pdl_wait_then_trigger();
  const int64_t src_row = p.rows[blockIdx.x];
  const char* src = static_cast<const char*>(p.x) + src_row * p.row_bytes;
  char* dst = static_cast<char*>(p.out) + static_cast<int64_t>(blockIdx.x) * p.row_bytes;
  const bool aligned = (reinterpret_cast<uintptr_t>(p.x) | reinterpret_cast<uintptr_t>(p.out)) % 16 == 0;
  if (aligned && p.row_bytes % 16 == 0) {
    for (int64_t v = threadIdx.x; v < p.row_bytes / 16; v += blockDim.x)
      store_vec(dst + v * 16, load_vec(src + v * 16));
  } else {
    for (int64_t i = threadIdx.x; i < p.row_bytes; i += blockDim.x) dst[i] = src[i];
  }
}

}  // namespace

void launch_gather_rows(const GatherRowsParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  launch(policy, Site::kGatherRows, Pdl::kEnrolled, gather_rows_kernel, dim3(p.num_rows), dim3(kThreads), 0,
         stream, p);
}

}  // namespace tpserve::kernels
