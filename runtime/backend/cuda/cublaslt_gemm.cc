#include "runtime/backend/cuda/cublaslt_gemm.h"

#include "common/cuda_check.h"
#include "common/log.h"

namespace tpserve {

CublasLtGemm::CublasLtGemm(void* workspace, size_t workspace_bytes)
    : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  CUBLAS_CHECK(cublasLtCreate(&handle_));
}

CublasLtGemm::~CublasLtGemm() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.out_layout);
    cublasLtMatrixLayoutDestroy(p.x_layout);
    cublasLtMatrixLayoutDestroy(p.w_layout);
    cublasLtMatmulDescDestroy(p.desc);
  }
  const cublasStatus_t rc = cublasLtDestroy(handle_);
  if (rc != CUBLAS_STATUS_SUCCESS) log_error("cublasLtDestroy: ", cublas_error_text(rc));
}

// Column-major view of the row-major product: out^T [N, M] = w [N, K] (stored as K x N, transposed) *
// x^T [K, M] (stored as K x M). This is the "TN" case every cuBLASLt release covers well.
const CublasLtGemm::Plan& CublasLtGemm::plan(int m, int n, int k, bool out_f32) {
  const auto key = std::make_tuple(m, n, k, out_f32);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan p;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof(none)));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.w_layout, CUDA_R_16BF, k, n, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.x_layout, CUDA_R_16BF, k, m, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.out_layout, out_f32 ? CUDA_R_32F : CUDA_R_16BF, n, m, n));

  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_bytes_;
  const uint32_t alignment = 16;  // tensors are row views of arena allocations: 16-byte aligned at least
  CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &alignment, sizeof(alignment)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t rc = cublasLtMatmulAlgoGetHeuristic(
      handle_, p.desc, p.w_layout, p.x_layout, p.out_layout, p.out_layout, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  CUBLAS_CHECK(rc);
  TPS_CHECK(found > 0, "cuBLASLt has no algorithm for out[", m, ", ", n, "] = x[", m, ", ", k, "] * w[", n,
            ", ", k, "]^T (", out_f32 ? "f32" : "bf16", " out)");
  p.algo = result.algo;
  log_debug("cuBLASLt plan for M=", m, " N=", n, " K=", k, out_f32 ? " f32" : " bf16", " out, workspace ",
            result.workspaceSize, " bytes");
  return plans_.emplace(key, p).first->second;
}

void CublasLtGemm::run(const void* x, const void* w, void* out, bool out_f32, int m, int n, int k,
                       cudaStream_t stream) {
  const Plan& p = plan(m, n, k, out_f32);
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, w, p.w_layout, x, p.x_layout, &beta, out, p.out_layout,
                              out, p.out_layout, &p.algo, workspace_, workspace_bytes_, stream));
}

}  // namespace tpserve
