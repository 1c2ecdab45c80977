// LogitAdjuster: one request's logit bias, penalties and min_tokens, turned into the entries of its sampled
// rows (StepBatch::logit_adjustments). vLLM's order and definitions: the bias is added first; then the
// repetition penalty r divides a positive logit by r and multiplies a negative one, for every token of the
// prompt or the output; then frequency x (times generated) and presence (once generated) are subtracted.
// min_tokens gives the request's stop tokens (the model's EOS ids, even under ignore_eos, as vLLM's, and
// stop_token_ids) a bias of -inf while fewer than min_tokens tokens were generated.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/model/step_batch.h"

namespace tpserve {

// repetition_penalty's range: beyond it a logit divided or multiplied by it overflows a float.
inline constexpr float kMinRepetitionPenalty = 1e-6f, kMaxRepetitionPenalty = 1e6f;

struct LogitProcessing {
  std::vector<std::pair<int32_t, float>> logit_bias;  // token -> added to its logit (distinct tokens)
  float repetition_penalty = 1.0f;                    // > 0; 1 = off
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int min_tokens = 0;
  // Penalties make a row's adjustments depend on the tokens before it.
  bool penalized() const {
    return repetition_penalty != 1.0f || frequency_penalty != 0.0f || presence_penalty != 0.0f;
  }
  bool any() const { return penalized() || !logit_bias.empty() || min_tokens != 0; }
};

class LogitAdjuster {
 public:
  LogitAdjuster() = default;  // nothing to adjust
  // stop_tokens: the ids that end the request (masked before min_tokens).
  LogitAdjuster(const LogitProcessing& processing, const std::vector<int32_t>& prompt,
                const std::vector<int32_t>& stop_tokens);

  bool active() const { return !tokens_.empty(); }
  bool penalized() const { return penalized_; }
  // A generated token (in order).
  void observe(int32_t token);
  // The most entries one row gets now (each tracked token once).
  int max_row_entries() const { return static_cast<int>(tokens_.size()); }
  // Appends the entries of sampled row `row`, which draws generated token number `index` (0 = the first).
  void append(int32_t row, int index, std::vector<LogitAdjustment>& out) const;

 private:
  struct Tracked {
    float bias = 0.0f;
    int32_t generated = 0;   // times generated
    bool in_prompt = false;  // tracked with a repetition penalty only
    bool stops = false;      // masked before min_tokens
  };
  std::unordered_map<int32_t, Tracked> tokens_;
  float repetition_ = 1.0f, frequency_ = 0.0f, presence_ = 0.0f;
  int min_tokens_ = 0;
  bool penalized_ = false;
};

}  // namespace tpserve
