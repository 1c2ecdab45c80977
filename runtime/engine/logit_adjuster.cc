#include "runtime/engine/logit_adjuster.h"

#include <cmath>
#include <limits>

namespace tpserve {

LogitAdjuster::LogitAdjuster(const LogitProcessing& p, const std::vector<int32_t>& prompt,
                             const std::vector<int32_t>& stop_tokens)
    : repetition_(p.repetition_penalty),
      frequency_(p.frequency_penalty),
      presence_(p.presence_penalty),
      min_tokens_(p.min_tokens),
      penalized_(p.penalized()) {
  for (const auto& [token, bias] : p.logit_bias) tokens_[token].bias += bias;
  if (min_tokens_ > 0)
    for (int32_t token : stop_tokens) tokens_[token].stops = true;
  if (repetition_ != 1.0f)
    for (int32_t token : prompt) tokens_[token].in_prompt = true;
}

void LogitAdjuster::observe(int32_t token) {
  if (penalized_) ++tokens_[token].generated;
}

void LogitAdjuster::append(int32_t row, int index, std::vector<LogitAdjustment>& out) const {
  const bool masking = index < min_tokens_;
  for (const auto& [token, t] : tokens_) {
    LogitAdjustment a{row, token, t.bias, 1.0f, 0.0f};
    if (t.stops && masking) a.bias = -std::numeric_limits<float>::infinity();
    if (t.in_prompt || t.generated > 0) a.scale = repetition_;
    if (t.generated > 0) a.subtract = frequency_ * static_cast<float>(t.generated) + presence_;
    if (a.bias != 0.0f || a.scale != 1.0f || a.subtract != 0.0f) out.push_back(a);
  }
}

}  // namespace tpserve
