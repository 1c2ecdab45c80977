// One streaming chat completion against an OpenAI-compatible server: POST /v1/chat/completions with
// "stream": true, read the SSE chunks (`data: {...}`, ending with `data: [DONE]`) as they arrive, and record
// when each chunk with content came. Token counts come from the final usage chunk when the server sends
// one (stream_options.include_usage), else one token per content chunk.
#pragma once

#include <httplib.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace tpserve::bench {

struct ChatRequest {
  std::string model;
  std::string prompt;
  int max_tokens = 128;
  double temperature = 0.0;
  bool ignore_eos = false;  // vLLM's extension; sent only when set
};

struct StreamTiming {
  bool ok = false;
  std::string error;              // why it failed (HTTP status, transport error, server error chunk)
  double start_s = 0;             // request sent, since the run began
  double e2e_s = 0;               // [DONE] (or the end of the stream) since sent
  std::vector<double> content_s;  // arrival of each chunk with content, since sent
  int usage_tokens = -1;          // usage.completion_tokens; -1 when not reported
  int prompt_tokens = -1;         // usage.prompt_tokens; -1 when not reported
  int cached_tokens = -1;         // of them, found in the server's prefix cache; -1 when not reported
  std::string finish_reason;
  std::string text;

  // Tokens generated: the server's count when reported, else the content chunks.
  int output_tokens() const { return usage_tokens >= 0 ? usage_tokens : static_cast<int>(content_s.size()); }
};

// What one SSE data payload carries.
struct ChunkInfo {
  bool done = false;    // [DONE]
  std::string content;  // choices[0].delta.content (empty when absent or null)
  std::optional<int> completion_tokens;
  std::optional<int> prompt_tokens;  // usage.prompt_tokens
  std::optional<int> cached_tokens;  // usage.prompt_tokens_details.cached_tokens
  std::string finish_reason;
  std::string error;  // {"error": {...}} chunks, or a payload that is not JSON
};
ChunkInfo parse_chunk(const std::string& data);

// The request body (JSON).
std::string chat_request_body(const ChatRequest& request);

// Sends one request on `client` and reads the stream to its end. path: "/v1/chat/completions" (with any
// base-path prefix). run_start: the clock's origin for start_s.
StreamTiming stream_chat_completion(httplib::Client& client, const std::string& path,
                                    const ChatRequest& request,
                                    std::chrono::steady_clock::time_point run_start);

}  // namespace tpserve::bench
