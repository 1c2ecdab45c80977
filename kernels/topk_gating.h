// Router gating: softmax over the experts' logits in fp32, the k most probable experts (the k largest logits,
// ties to the smaller index), their probabilities renormalised to sum to one when asked. By the logits' order
// (by_logits) a NaN logit counts as -inf; by the probabilities' order a row whose probabilities are NaN (a
// NaN or +inf logit) picks no expert (ids INT_MAX).
#pragma once

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

inline constexpr int kGatingMaxExperts = 512;
inline constexpr int kGatingMaxK = 16;

struct TopkGatingParams {
  const float* logits = nullptr;  // [T, E]
  float* weights = nullptr;       // [T, k]
  int32_t* ids = nullptr;         // [T, k] expert indices, most probable first
  int tokens = 0;                 // T
  int num_experts = 0;            // E <= kGatingMaxExperts
  int k = 0;                      // 1..min(E, kGatingMaxK)
  bool renormalize = false;
  // The arg-max rounds reduce over the warp with redux.sync on SM80+ (kernels/topk_gating.cuh
  // warp_argmax_round); false: shuffle steps (the same picks).
  bool redux = false;
  // The arg-max rounds on the logits' order, the softmax's sum beside them (kernels/topk_gating.cuh
  // warp_topk_gating_by_logits); false: the softmax first, the rounds on the probabilities.
  bool by_logits = true;
};

void launch_topk_gating(const TopkGatingParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
