// Token masks before sampling (backend.h: mask_logits; structured output): for each mask, the logits of
// its sampled row whose tokens' bits are clear become -inf. One thread per (mask, logit of this rank's
// vocabulary slice).
#pragma once

#include <cstdint>

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

struct LogitMaskParams {
  float* logits = nullptr;          // [num_rows, vocab] in place: this rank's vocabulary slice
  const int32_t* rows = nullptr;    // [n] sampled row of each mask
  const uint32_t* masks = nullptr;  // [n, words] bit t % 32 of word t / 32 set: global token t allowed
  int64_t vocab_begin = 0;          // global id of the slice's first logit
  int vocab = 0;
  int num_rows = 0;
  int words = 0;
  int n = 0;
};

void launch_logit_mask(const LogitMaskParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
