// CudaBackend router ops: top-k gating, and the residual add + RMSNorm, router and gating in one launch
// (Backend::add_rmsnorm_route).
#include <algorithm>

#include "kernels/rmsnorm.h"
#include "kernels/router_fused.h"
#include "kernels/topk_gating.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/tensor_checks.h"

namespace tpserve {

using cuda_ops::bf16_mut;
using cuda_ops::bf16_ptr;
using cuda_ops::expect;
using cuda_ops::to_int;

namespace {

kernels::TopkGatingParams gating_params(Tensor logits, int k, bool renormalize, Tensor weights, Tensor ids,
                                        bool redux, bool by_logits, const char* op) {
  expect(logits, DType::kF32, op, "router logits");
  expect(weights, DType::kF32, op, "weights");
  expect(ids, DType::kI32, op, "ids");
  const int64_t experts = logits.dim(-1), tokens = logits.numel() / std::max<int64_t>(experts, 1);
  TPS_CHECK(experts <= kernels::kGatingMaxExperts && k >= 1 &&
                k <= std::min<int64_t>(experts, kernels::kGatingMaxK),
            op, ": k=", k, " of ", experts, " experts (at most ", kernels::kGatingMaxExperts,
            " experts, k <= ", kernels::kGatingMaxK, ")");
  TPS_CHECK(weights.numel() == tokens * k && ids.numel() == tokens * k, op, ": weights ",
            weights.shape_string(), " ids ", ids.shape_string(), " for ", tokens, " tokens x ", k);
  kernels::TopkGatingParams p;
  p.logits = logits.ptr<float>();
  p.weights = weights.ptr<float>();
  p.ids = ids.ptr<int32_t>();
  p.tokens = to_int(tokens, "tokens");
  p.num_experts = static_cast<int>(experts);
  p.k = k;
  p.renormalize = renormalize;
  p.redux = redux;
  p.by_logits = by_logits;
  return p;
}

}  // namespace

void CudaBackend::topk_gating(Tensor router_logits, int k, bool renormalize, Tensor weights, Tensor ids) {
  kernels::launch_topk_gating(
      gating_params(router_logits, k, renormalize, weights, ids, options_.kernels.topk_gating_redux,
                    options_.kernels.topk_gating_by_logits, "topk_gating"),
      stream_, *policy_);
}

// Fused (kernels/router_fused.h): one launch of one thread-block cluster for the three ops, where the device
// has clusters (SM90+) and the shape fits: up to 16 tokens, 128 experts, H a multiple of 32, the blocks'
// shared memory within the device's limit. Elsewhere, or with the option off: the three ops.
void CudaBackend::add_rmsnorm_route(Tensor residual, Tensor x, Tensor norm_w, float eps, Tensor normed,
                                    Tensor router_w, Tensor logits, int k, bool renormalize, Tensor weights,
                                    Tensor ids) {
  const char* op = "add_rmsnorm_route";
  const kernels::RmsNormParams norm = cuda_ops::norm_params(x, norm_w, eps, normed, op);  // x, w, normed
  expect(residual, DType::kBF16, op, "residual");
  expect(router_w, DType::kBF16, op, "router weight");
  TPS_CHECK(residual.numel() == x.numel(), op, ": residual ", residual.shape_string(), " x ",
            x.shape_string());
  TPS_CHECK(router_w.ndim == 2 && router_w.dim(1) == norm.hidden && logits.dim(-1) == router_w.dim(0) &&
                logits.numel() == static_cast<int64_t>(norm.tokens) * router_w.dim(0),
            op, ": router weight ", router_w.shape_string(), " logits ", logits.shape_string(), " for x ",
            x.shape_string());
  const kernels::TopkGatingParams gating =
      gating_params(logits, k, renormalize, weights, ids, options_.kernels.topk_gating_redux,
                    options_.kernels.topk_gating_by_logits, op);
  if (norm.tokens == 0) return;

  kernels::RouterFusedParams p;
  p.x = norm.x;
  p.residual = bf16_mut(residual);
  p.norm_weight = norm.weight;
  p.normed = norm.out;
  p.eps = eps;
  p.router = bf16_ptr(router_w);
  p.logits = logits.ptr<float>();
  p.weights = weights.ptr<float>();
  p.ids = ids.ptr<int32_t>();
  p.tokens = norm.tokens;
  p.hidden = norm.hidden;
  p.experts = gating.num_experts;
  p.k = k;
  p.renormalize = renormalize;
  p.stores_after_gather = options_.kernels.router_fused_stores_after_gather;
  p.push_logits = options_.kernels.router_fused_push_logits;
  p.redux_gating = gating.redux;
  p.gating_by_logits = gating.by_logits;
  p.weights_evict_first = options_.kernels.weights_l2_evict_first;
  const bool shape_fits = kernels::router_fused_fits(p);
  const size_t smem = shape_fits ? kernels::router_fused_smem_bytes(p) : 0;
  if (p.tokens > options_.kernels.router_fused_max_tokens || !router_fused_available_ || !shape_fits ||
      smem > staged_smem_limit_) {
    Backend::add_rmsnorm_route(residual, x, norm_w, eps, normed, router_w, logits, k, renormalize, weights,
                               ids);
    return;
  }
  for (const Tensor* t : {&residual, &x, &norm_w, &normed, &router_w})
    cuda_ops::expect_aligned16(*t, op, "an operand");
  kernels::launch_router_fused(p, smem, stream_, *policy_);
}

}  // namespace tpserve
