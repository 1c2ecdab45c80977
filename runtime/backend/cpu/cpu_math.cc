// Row kernels shared by the CPU reference ops.
#include <cmath>

#include "runtime/backend/cpu/cpu_ops.h"

namespace tpserve::cpu {

void rmsnorm_row(const float* x, const float* w, float eps, int n, float* out) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float inv = 1.0f / std::sqrt(static_cast<float>(sum / n) + eps);
  for (int i = 0; i < n; ++i) out[i] = w[i] * (x[i] * inv);
}

void matvec(const float* w, const float* x, int64_t n, int64_t k, float* out) {
  for (int64_t r = 0; r < n; ++r) {
    const float* row = w + r * k;
    // Eight partial sums: lets the compiler vectorise without -ffast-math, deterministic order.
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= k; i += 8)
      for (int j = 0; j < 8; ++j) acc[j] += row[i + j] * x[i + j];
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < k; ++i) s += row[i] * x[i];
    out[r] = s;
  }
}

}  // namespace tpserve::cpu
