// Log-probabilities of drawn tokens from the sampler's candidates: each of P ranks keeps, per row, the C
// largest logits of its vocabulary slice and [max, sum of exp(logit - max)] over the slice (temperature 1).
// Every token a row can draw is among the C best overall (sampling draws within them), so the drawn token's
// logit is in some rank's list, and the log-sum-exp over the vocabulary follows from the P pairs.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/model/step_batch.h"

namespace tpserve {

struct LogprobCandidates {
  const float* values;  // [P, R, C]
  const int32_t* ids;   // [P, R, C]
  const float* stats;   // [P, R, 2]
  int ranks, rows, per_rank;
};

// Row r: the log-probability of tokens[r] and of the top[r] most likely tokens (top[r] < 0: the row asked
// for none, its entry stays empty; tokens[r] < 0, a row past a rejected draft, gets only the top list).
// A drawn token not among the candidates (only NaN logits do that) gets minus infinity. Throws
// tpserve::Error when top[r] exceeds a rank's candidates.
std::vector<TokenLogprobs> token_logprobs(const LogprobCandidates& c, const std::vector<int32_t>& tokens,
                                          const std::vector<int32_t>& top);

}  // namespace tpserve
