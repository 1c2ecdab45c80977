// Device pieces the GEMV kernels share (kernels/gemv.cu, kernels/gemv_staged.cu): storing a summed tile.
#pragma once

#include <type_traits>

#include "kernels/device_common.cuh"
#include "kernels/gemv.h"
#include "kernels/mma_tile.cuh"

namespace tpserve::kernels {

// Warp 0's summed tile into out (rows row_lo / row_hi of this thread, columns = tokens).
template <int NT, typename Out>
__device__ __forceinline__ void store_tile(const GemvParams& p, const float (&acc)[NT][4], int row_lo,
                                           int row_hi, int q) {
  Out* out =
      std::is_same_v<Out, float> ? reinterpret_cast<Out*>(p.out_f32) : reinterpret_cast<Out*>(p.out_bf16);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int token = nt * kMmaCols + 2 * q + (i & 1);
      const int row = i < 2 ? row_lo : row_hi;
      if (token < p.m && row < p.n) {
        if constexpr (std::is_same_v<Out, float>)
          out[static_cast<int64_t>(token) * p.n + row] = acc[nt][i];
        else
          out[static_cast<int64_t>(token) * p.n + row] = __float2bfloat16(acc[nt][i]);
      }
    }
}

}  // namespace tpserve::kernels
