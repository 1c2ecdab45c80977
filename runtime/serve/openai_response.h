// The JSON bodies tpserve answers with, in OpenAI's shapes: whole responses (text_completion,
// chat.completion), streaming chunks (text_completion, chat.completion.chunk) including the usage chunk
// with empty choices, and the model list. Field order follows OpenAI's documentation.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/serve/logprobs_json.h"

namespace tpserve::serve {

enum class Endpoint { kCompletions, kChatCompletions };

struct ResponseHeader {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;       // cmpl-... / chatcmpl-...
  int64_t created = 0;  // unix seconds
  std::string model;
  bool return_token_ids = false;
  bool logprobs = false;  // choices carry log-probabilities (else "logprobs": null)
};

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  // of the prompt: usage.prompt_tokens_details.cached_tokens
};

// A tool call parsed out of a chat answer (runtime/serve/chat_output_parser.h).
struct ToolCall {
  int index = 0;          // among the answer's tool calls, from 0
  std::string id;         // call_<hex>, fresh per call
  std::string name;       // the function's name
  std::string arguments;  // a JSON text, as OpenAI's function.arguments
};

// An answer, or one streamed piece of it: its text (a completion's text, a chat answer's content) and, for
// chat answers parsed by ChatOutputParser, the reasoning and the tool calls.
struct AnswerParts {
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> tool_calls;
  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
  // Appends a later piece.
  void append(AnswerParts&& later);
};

// A fresh tool call id: "call_" and 24 hex digits.
std::string new_tool_call_id();

// A fresh response id with the endpoint's prefix.
ResponseHeader make_response_header(Endpoint endpoint, const std::string& model, bool return_token_ids);

// One choice of a whole answer (a request asks for `n`).
struct Choice {
  AnswerParts answer;
  std::vector<int32_t> token_ids;
  std::string finish_reason;
  std::vector<TokenLogprob> logprobs;  // with header.logprobs
};

// The choices in order (index = position). A chat answer's message has content (null where it is empty and
// tool calls were made), reasoning_content where there is reasoning, and tool_calls where there are tool
// calls; a completion's text is the content.
nlohmann::ordered_json full_response(const ResponseHeader& h, const std::vector<Choice>& choices,
                                     const Usage& usage);

// One streaming chunk, of choice `index`. A choice's first chat chunk carries the role; finish_reason is set
// on its last. A chat delta carries each part that is not empty; each tool call comes whole, in one delta.
// `logprobs`: the chunk's tokens' (with header.logprobs; completions count text offsets from
// `text_offset`).
nlohmann::ordered_json stream_chunk(const ResponseHeader& h, int index, const AnswerParts& piece,
                                    const std::vector<int32_t>& token_ids, bool first,
                                    const std::optional<std::string>& finish_reason,
                                    const std::vector<TokenLogprob>& logprobs = {}, size_t text_offset = 0);

// The last chunk of a stream with stream_options.include_usage: usage, and choices: [].
nlohmann::ordered_json usage_chunk(const ResponseHeader& h, const Usage& usage);

nlohmann::ordered_json usage_json(const Usage& usage);

nlohmann::ordered_json model_list(const std::string& model, int64_t created, int64_t max_model_len);

// "data: {json}\n\n"
std::string sse_event(const nlohmann::ordered_json& payload);

}  // namespace tpserve::serve
