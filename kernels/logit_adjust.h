// Logit adjustments before sampling (backend.h: adjust_logits): per entry, one (row, token) logit of this
// rank's vocabulary slice becomes x = logit + bias; x = x > 0 ? x / scale : x * scale; x -= subtract (logit
// bias, repetition penalty, frequency and presence penalties, min_tokens' -inf bias). One thread per entry;
// entries name distinct (row, token) pairs, so no two threads write one logit.
#pragma once

#include <cstdint>

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

struct LogitAdjustParams {
  float* logits = nullptr;           // [rows, vocab] in place: this rank's vocabulary slice
  const int32_t* targets = nullptr;  // [n, 2] sampled row, global token id
  const float* values = nullptr;     // [n, 3] bias, scale, subtract
  int64_t vocab_begin = 0;           // global id of the slice's first logit; others' entries are skipped
  int vocab = 0;
  int rows = 0;
  int n = 0;
};

void launch_logit_adjust(const LogitAdjustParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
