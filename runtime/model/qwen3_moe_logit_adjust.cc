// Logit adjustments of a step (logit bias, penalties, min_tokens; StepBatch::logit_adjustments): checked and
// copied to the device only for steps that carry some (they run eagerly), then applied to the sampled rows'
// logits between the lm_head and the candidates (lm_head_candidates).
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

}  // namespace tpserve
