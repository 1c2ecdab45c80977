// The JSON bodies tpserve answers with, in OpenAI's shapes: whole responses (text_completion,
// chat.completion), streaming chunks (text_completion, chat.completion.chunk) including the usage chunk
// with empty choices, and the model list. Field order follows OpenAI's documentation.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tpserve::serve {

enum class Endpoint { kCompletions, kChatCompletions };

struct ResponseHeader {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;       // cmpl-... / chatcmpl-...
  int64_t created = 0;  // unix seconds
  std::string model;
  bool return_token_ids = false;
};

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
};

// A fresh response id with the endpoint's prefix.
ResponseHeader make_response_header(Endpoint endpoint, const std::string& model, bool return_token_ids);

nlohmann::ordered_json full_response(const ResponseHeader& h, const std::string& text,
                                     const std::vector<int32_t>& token_ids, const std::string& finish_reason,
                                     const Usage& usage);

// One streaming chunk. The first chat chunk carries the role; finish_reason is set on the last.
nlohmann::ordered_json stream_chunk(const ResponseHeader& h, const std::string& text,
                                    const std::vector<int32_t>& token_ids, bool first,
                                    const std::optional<std::string>& finish_reason);

// The last chunk of a stream with stream_options.include_usage: usage, and choices: [].
nlohmann::ordered_json usage_chunk(const ResponseHeader& h, const Usage& usage);

nlohmann::ordered_json usage_json(const Usage& usage);

nlohmann::ordered_json model_list(const std::string& model, int64_t created, int64_t max_model_len);

// "data: {json}\n\n"
std::string sse_event(const nlohmann::ordered_json& payload);

}  // namespace tpserve::serve
