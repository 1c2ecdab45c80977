// Embedding lookup over this rank's slice of the vocabulary (vocab-parallel embedding).
#pragma once

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

struct EmbeddingParams {
  const int32_t* ids = nullptr;  // [T] global token ids
  const bf16* table = nullptr;   // [V, H] rows vocab_begin .. vocab_begin + V - 1 of the full table
  bf16* out = nullptr;           // [T, H]; rows of ids outside the slice are zero
  int64_t vocab_begin = 0;
  int vocab_rows = 0;  // V
  int hidden = 0;      // H, a multiple of 8
  int tokens = 0;      // T
};

void launch_embedding(const EmbeddingParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
