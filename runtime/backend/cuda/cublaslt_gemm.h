// Dense projections through cuBLASLt: out[M, N] = x[M, K] * w[N, K]^T, bf16 in, fp32 compute, bf16 or f32
// out. The algorithm is chosen once per (M, N, K, out dtype) with cublasLtMatmulAlgoGetHeuristic and
// cached with its descriptors; the workspace is allocated once by the caller.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <map>
#include <tuple>

namespace tpserve {

class CublasLtGemm {
 public:
  CublasLtGemm(void* workspace, size_t workspace_bytes);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // x, w, out 16-byte aligned; K a multiple of 8.
  void run(const void* x, const void* w, void* out, bool out_f32, int m, int n, int k, cudaStream_t stream);
  size_t cached_plans() const { return plans_.size(); }

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t w_layout = nullptr, x_layout = nullptr, out_layout = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  const Plan& plan(int m, int n, int k, bool out_f32);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_;
  size_t workspace_bytes_;
  std::map<std::tuple<int, int, int, bool>, Plan> plans_;
};

}  // namespace tpserve
