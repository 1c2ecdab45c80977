// Writing the answer to a generation request that the engine loop accepted: either one JSON body once the
// request finished, or server-sent events as tokens arrive (`data: {chunk}\n\n` ... `data: [DONE]\n\n`).
// A failed write, or a client seen gone while waiting, cancels the request, which the engine loop aborts.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/serve/chat_output_parser.h"
#include "runtime/serve/openai_response.h"
#include "runtime/serve/request_stream.h"

namespace httplib {
struct Response;
}

namespace tpserve::serve {

struct GenerationResponse {
  ResponseHeader header;
  std::vector<std::shared_ptr<RequestStream>> streams;  // one per choice, in order (prompt-major)
  int choices_per_prompt = 1;                           // `n`: usage counts each prompt once
  std::vector<std::string> echo;  // completions' echo: per choice, the text its text starts with (or none)
  bool include_usage = false;
  // stream_options.continuous_usage_stats: every chunk carries its choice's usage so far (prompt tokens per
  // choice, as prompt_tokens).
  bool continuous_usage = false;
  std::vector<int> prompt_tokens;
  // Chat answers: what the text is parsed for (reasoning, tool calls); nothing: the text is the content.
  ChatOutputOptions chat_output;
  std::function<void()> on_written;   // called once the response is fully written, or abandoned
  std::function<bool()> client_gone;  // whether the client has closed its connection (null: never asked)
};

// Blocks until every choice finished, then sets the JSON body (500 with an error body if the engine failed).
// A client that goes away meanwhile has its requests cancelled (the engine aborts them at its next step).
void respond_whole(httplib::Response& res, GenerationResponse g);
// Sets a chunked text/event-stream body fed by the choices' streams: each choice's chunks carry its index,
// as they come; usage (asked for) and [DONE] once every choice has finished.
void respond_streaming(httplib::Response& res, GenerationResponse g);

}  // namespace tpserve::serve
