// Argument checks shared by the CUDA backend's ops: device, dtype, alignment, with the op and argument named.
#pragma once

#include <cstdint>

#include "kernels/kernel_api.h"
#include "kernels/rmsnorm.h"
#include "runtime/backend/tensor.h"

namespace tpserve::cuda_ops {

inline void expect(const Tensor& t, DType dtype, const char* op, const char* what) {
  TPS_CHECK(t.device == Device::kCuda && t.dtype == dtype, op, ": ", what, " must be a CUDA ",
            dtype_name(dtype), " tensor, got ", t.shape_string(),
            t.device == Device::kCuda ? "" : " on the host");
}

// 16-byte vector access needs 16-byte aligned rows.
inline void expect_aligned16(const Tensor& t, const char* op, const char* what) {
  TPS_CHECK(reinterpret_cast<uintptr_t>(t.data) % 16 == 0, op, ": ", what, " is not 16-byte aligned");
}

inline const kernels::bf16* bf16_ptr(const Tensor& t) {
  return static_cast<const kernels::bf16*>(t.data);
}
inline kernels::bf16* bf16_mut(const Tensor& t) {
  return static_cast<kernels::bf16*>(t.data);
}
inline int to_int(int64_t v, const char* what) {
  TPS_CHECK(v >= 0 && v <= INT32_MAX, what, " = ", v, " does not fit in int");
  return static_cast<int>(v);
}

// The RMSNorm kernel's parameters for x [T, H] (bf16), weight [H], out [T, H], checked.
kernels::RmsNormParams norm_params(Tensor x, Tensor w, float eps, Tensor out, const char* op);

}  // namespace tpserve::cuda_ops
