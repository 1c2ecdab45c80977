// Log-probabilities as clients see them: each generated token's, with the most likely tokens', named by
// their text (tokens that are not whole UTF-8 characters show U+FFFD; chat answers give the raw bytes
// too), or "token_id:<id>" on a server without a tokenizer (vLLM's spelling). Chat answers carry them as
// {"content": [{token, logprob, bytes, top_logprobs: [...]}]}, completions in OpenAI's legacy shape
// {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "runtime/model/step_batch.h"

namespace tpserve::serve {

class Tokenizer;

struct LogprobEntry {
  std::string token;  // valid UTF-8
  std::string bytes;  // the token's raw bytes (empty without a tokenizer)
  float logprob = 0;
};

struct TokenLogprob {
  LogprobEntry drawn;
  std::vector<LogprobEntry> top;  // best first
};

TokenLogprob describe_logprobs(int32_t token, const TokenLogprobs& lp, const Tokenizer* tokenizer);

// Chat: the choice's (or chunk's) "logprobs" object.
nlohmann::ordered_json chat_logprobs_json(const std::vector<TokenLogprob>& tokens);
// Completions: the same, with text offsets counted from `text_offset` (the characters of the token strings
// before these tokens; a token that is part of a character counts its U+FFFD).
nlohmann::ordered_json completion_logprobs_json(const std::vector<TokenLogprob>& tokens, size_t text_offset);
// What a token adds to the completions' text offset.
size_t completion_text_length(const TokenLogprob& token);

}  // namespace tpserve::serve
