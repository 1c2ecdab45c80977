// The request fields that adjust logits before sampling: logit_bias, presence_penalty, frequency_penalty,
// repetition_penalty and min_tokens (vLLM's and OpenAI's meanings; runtime/engine/logit_adjuster.h applies
// them). Every problem throws ApiError naming the field.
#pragma once

#include <cstdint>

#include "runtime/engine/logit_adjuster.h"
#include "runtime/serve/json_fields.h"

namespace tpserve::serve {

// logit_bias names at most this many tokens (a step's room for adjustments is sized by it).
inline constexpr int kMaxLogitBiasTokens = 1024;

// repetition_penalty defaults to the checkpoint's (generation_config.json), the others to off.
LogitProcessing parse_logit_processing(const JsonFields& f, int32_t vocab_size, double default_repetition);
// min_tokens may not exceed the request's max_tokens (given or resolved): 400 naming it.
void check_min_tokens(const LogitProcessing& p, int max_tokens, const char* max_tokens_field);

}  // namespace tpserve::serve
