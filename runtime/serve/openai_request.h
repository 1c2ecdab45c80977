// Parsing and validation of OpenAI /v1/completions and /v1/chat/completions request bodies into a
// GenerationJob. Every problem throws ApiError naming the field; unknown fields are ignored (as OpenAI
// does); fields we cannot honour (best_of, suffix, ...) are refused with a 400 that names
// them instead of being silently ignored. docs/serving.md lists every field.
#pragma once

#include <string>

#include "runtime/model/model_spec.h"
#include "runtime/serve/chat_output_parser.h"
#include "runtime/serve/generation_job.h"
#include "runtime/serve/json_fields.h"
#include "runtime/serve/structured_grammars.h"
#include "runtime/serve/tokenizer.h"

namespace tpserve::serve {

struct RequestLimits {
  const Tokenizer* tokenizer = nullptr;  // nullptr: prompts must be token ids
  std::string model_name;                // the one model served; other names get 404
  int32_t vocab_size = 0;                // of the model: prompt and stop ids must be below it
  int64_t max_context_tokens = 0;        // prompt + generated: Scheduler::max_request_tokens()
  GenerationDefaults defaults;           // sampling defaults (generation_config.json)
  // The server's limits (server.* in the config); 0 = none beyond the context.
  int64_t max_prompt_tokens = 0;
  int64_t max_output_tokens = 0;
  int max_stop_sequences = 0;  // entries of stop and of stop_token_ids, each
  int max_stop_string_bytes = 0;
  int max_queued_requests = 0;  // server.max_queued_requests: n choices take n places in the queue
  int max_logprobs = 20;        // top log-probabilities a request may ask for (Scheduler's max_logprobs)
  // Chat answers: a leading <think> block parsed out as reasoning_content (server.reasoning_parser), and
  // <tool_call> blocks as tool_calls where the request offers tools (server.tool_call_parser).
  bool parse_reasoning = false;
  bool parse_tool_calls = false;
  // Structured output's compiled rules over the tokenizer's vocabulary (nullptr without a tokenizer).
  std::shared_ptr<StructuredGrammars> grammars;
};

struct ParsedRequest {
  GenerationJob job;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with usage
  bool continuous_usage =
      false;  // stream_options.continuous_usage_stats (with include_usage): every chunk too
  bool return_token_ids = false;  // choices carry token_ids (always when the server has no tokenizer)
  ChatOutputOptions chat_output;  // chat: what the answer's text is parsed for
  // Choices (`n`) each prompt gets, and every choice's sampling seed, prompt-major (jobs.size() x n): the
  // server runs each job once per choice. Choice i of every prompt draws with seed + i where the request sent
  // a seed (choice 0 is the n = 1 answer), else each with a fresh seed of its own.
  int choices_per_prompt = 1;
  std::vector<int64_t> seeds;
  // One job per prompt (completions may send a batch; chat one), `job` being the first: choices are
  // prompt-major, choice index = prompt x n + i.
  std::vector<GenerationJob> jobs;
  // Completions' echo: per prompt, the text its choices' text starts with (empty without echo).
  std::vector<std::string> echo;
};

// Most choices (`n`) a request may ask for; each is a sequence of its own in the engine.
inline constexpr int kMaxChoices = 16;
// Most prompts in a completion request's batch (each also within server.max_queued_requests x n).
inline constexpr int kMaxBatchPrompts = 1024;

// The served tokenizer, or a 400 tokenizer_unavailable naming `field` (hint: appended to the message).
const Tokenizer& require_tokenizer(const RequestLimits& limits, const std::string& field,
                                   const char* hint = "");
// A JSON list of token ids, each checked against [0, vocab_size) (400 naming `path[i]` otherwise).
std::vector<int32_t> token_id_list(const nlohmann::ordered_json& list, const std::string& path,
                                   int32_t vocab_size);

// The optional `model` field: absent, or the served model's name (else 404 model_not_found).
void check_model(const JsonFields& f, const RequestLimits& limits);

ParsedRequest parse_completion_request(const std::string& body, const RequestLimits& limits);
ParsedRequest parse_chat_request(const std::string& body, const RequestLimits& limits);

}  // namespace tpserve::serve
