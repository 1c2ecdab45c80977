// POST /tokenize and POST /detokenize, in vLLM's shapes: the token ids a prompt becomes (`{"prompt": text}`,
// or `{"messages": [...]}` rendered by the chat template first, with the chat fields of
// /v1/chat/completions) with their count and the context length, and the text a list of token ids stands
// for. Nothing runs on the engine: these answer from the tokenizer on the HTTP thread.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "runtime/serve/openai_request.h"

namespace tpserve::serve {

// {"tokens": [...], "count": N, "max_model_len": M}; every problem an ApiError naming the field.
nlohmann::ordered_json tokenize_response(const std::string& body, const RequestLimits& limits);
// {"prompt": "..."}: the text of the ids, special tokens included; an id outside the tokenizer's vocabulary
// is a 400 naming it.
nlohmann::ordered_json detokenize_response(const std::string& body, const RequestLimits& limits);

}  // namespace tpserve::serve
