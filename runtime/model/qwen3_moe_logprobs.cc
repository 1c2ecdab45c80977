// Log-probabilities of a step's drawn tokens (requests that ask for them; such steps run eagerly): the
// sampled rows' logits are selected once more at temperature 1, into buffers of their own (the MTP draft
// steps reuse the sampler's), gathered from every rank, and merged on the host (token_logprobs.h).
#include "common/error.h"
#include "runtime/model/qwen3_moe.h"
#include "runtime/model/token_logprobs.h"

namespace tpserve {

void Qwen3MoeModel::logprob_candidates(int rows) {
  candidates(logits_.rows(0, rows), rows, ones_.rows(0, rows), raw_mine_, raw_all_);
}

std::vector<TokenLogprobs> Qwen3MoeModel::logprobs_of(const StepBatch& batch,
                                                      const std::vector<int32_t>& tokens) {
  const int rows = batch.num_samples(), P = layout_.tp_size, C = candidates_;
  const Candidates& c = P == 1 ? raw_mine_ : raw_all_;  // every rank's in [P, rows, C] order
  std::vector<float> values(static_cast<size_t>(P) * rows * C), stats(static_cast<size_t>(P) * rows * 2);
  std::vector<int32_t> ids(values.size());
  backend_.copy_to_host(values.data(), c.values.view({static_cast<int64_t>(values.size())}));
  backend_.copy_to_host(ids.data(), c.ids.view({static_cast<int64_t>(ids.size())}));
  backend_.copy_to_host(stats.data(), c.stats.view({static_cast<int64_t>(stats.size())}));
  return token_logprobs({values.data(), ids.data(), stats.data(), P, rows, C}, tokens, batch.logprobs);
}

}  // namespace tpserve
