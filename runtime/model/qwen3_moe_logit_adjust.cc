// Logit adjustments (logit bias, penalties, min_tokens; StepBatch::logit_adjustments) and token masks
// (structured output; StepBatch::mask_rows, token_masks) of a step: checked and copied to the device only
// for steps that carry some (they run eagerly), then applied to the sampled rows' logits between the lm_head
// and the candidates (lm_head_candidates).
#include <cmath>

#include "common/error.h"
#include "runtime/model/qwen3_moe.h"

namespace tpserve {

int Qwen3MoeModel::upload_logit_adjustments(const StepBatch& b) {
  const auto& entries = b.logit_adjustments;
  if (entries.empty()) return 0;
  const int n = static_cast<int>(entries.size());
  TPS_CHECK(entries.size() <= static_cast<size_t>(options_.max_logit_adjustments), "step has ", n,
            " logit adjustments, more than the ", options_.max_logit_adjustments, " the model was sized for");
  host_adjust_targets_.clear();
  host_adjust_values_.clear();
  for (const LogitAdjustment& a : entries) {
    TPS_CHECK(a.row >= 0 && a.row < b.num_samples() && a.token >= 0 && a.token < spec_.vocab_size,
              "step batch: logit adjustment of row ", a.row, " token ", a.token, " (", b.num_samples(),
              " sampled rows, vocabulary ", spec_.vocab_size, ")");
    TPS_CHECK(!std::isnan(a.bias) && a.bias != INFINITY && std::isfinite(a.scale) && a.scale > 0 &&
                  std::isfinite(a.subtract),
              "step batch: logit adjustment of row ", a.row, " token ", a.token, ": bias ", a.bias, " scale ",
              a.scale, " subtract ", a.subtract);
    host_adjust_targets_.insert(host_adjust_targets_.end(), {a.row, a.token});
    host_adjust_values_.insert(host_adjust_values_.end(), {a.bias, a.scale, a.subtract});
  }
  backend_.copy_from_host(adjust_targets_.rows(0, n), host_adjust_targets_.data());
  backend_.copy_from_host(adjust_values_.rows(0, n), host_adjust_values_.data());
  return n;
}

int Qwen3MoeModel::upload_token_masks(const StepBatch& b) {
  if (b.mask_rows.empty()) return 0;
  const int n = static_cast<int>(b.mask_rows.size()), words = mask_words(spec_.vocab_size);
  TPS_CHECK(n <= options_.max_token_masks, "step has ", n, " token masks, more than the ",
            options_.max_token_masks, " the model was sized for");
  TPS_CHECK(b.token_masks.size() == static_cast<size_t>(n) * words, "step batch: ", b.token_masks.size(),
            " token mask words for ", n, " masks of ", words, " words (vocabulary ", spec_.vocab_size, ")");
  for (int32_t row : b.mask_rows)
    TPS_CHECK(row >= 0 && row < b.num_samples(), "step batch: token mask of row ", row, " (", b.num_samples(),
              " sampled rows)");
  backend_.copy_from_host(mask_rows_.rows(0, n), b.mask_rows.data());
  backend_.copy_from_host(token_masks_.rows(0, n), b.token_masks.data());
  return n;
}

}  // namespace tpserve
