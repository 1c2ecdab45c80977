// GenerationJob: one validated request as the engine loop runs it: prompt ids, sampling, limits, and what
// the text path needs (stop strings, special-token handling). Built by openai_request.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine/logit_adjuster.h"
#include "runtime/model/step_batch.h"
#include "runtime/serve/structured_grammar.h"

namespace tpserve::serve {

struct GenerationJob {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int max_tokens = 16;
  std::vector<int32_t> stop_token_ids;  // finish with "stop" (in addition to EOS unless ignore_eos)
  bool ignore_eos = false;
  std::vector<std::string> stop;  // stop strings, non-empty; never part of the output
  bool skip_special_tokens = true;
  int logprobs = -1;  // log-probabilities of the generated tokens: -1 none, n >= 0 the drawn one's and top n
  LogitProcessing processing;  // logit_bias, penalties, min_tokens
  // Structured output: the rule the output follows (each choice starts its own constraint), from the token
  // after `structured_begin_after` when given (the end of the chat answer's reasoning).
  std::shared_ptr<StructuredGrammar> structured;
  std::optional<int32_t> structured_begin_after;
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
};

}  // namespace tpserve::serve
