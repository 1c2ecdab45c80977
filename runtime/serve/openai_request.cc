#include "runtime/serve/openai_request.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <optional>
#include <random>

#include "runtime/serve/api_error.h"
#include "runtime/serve/chat_request.h"
#include "runtime/serve/json_fields.h"
#include "runtime/serve/logit_processing_fields.h"
#include "runtime/serve/structured_grammars.h"
#include "runtime/serve/structured_output_fields.h"
#include "runtime/serve/tool_choice.h"

namespace tpserve::serve {
namespace {

using Json = nlohmann::ordered_json;
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// A seed for a request that gave none: distinct per request, so that sampling differs between requests.
int64_t fresh_seed() {
  static const uint64_t base = std::random_device{}() * 0x9E3779B97F4A7C15ull;
  static std::atomic<uint64_t> counter{0};
  uint64_t z = base + 0x9E3779B97F4A7C15ull * (counter.fetch_add(1) + 1);  // splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<int64_t>((z ^ (z >> 31)) >> 1);
}

std::vector<int32_t> tokenize(const std::string& text, const std::string& path, const RequestLimits& limits) {
  std::vector<int32_t> ids = require_tokenizer(limits, path, ": send token ids").encode(text);
  // A tokenizer larger than the model (a synthetic model with a small vocabulary, a mismatched
  // model.tokenizer) gives ids the model has no embedding for.
  for (const int32_t id : ids)
    if (limits.vocab_size > 0 && id >= limits.vocab_size)
      bad_request(path, "the tokenizer gives id " + std::to_string(id) +
                            ", beyond the model's vocabulary of " + std::to_string(limits.vocab_size) +
                            " tokens");
  return ids;
}

// One prompt of a completion request: its ids, the text it was given as (absent for token ids), and the
// field that names it in errors.
struct PromptInput {
  std::vector<int32_t> ids;
  std::optional<std::string> text;
  std::string field;
};

PromptInput one_prompt(const Json& prompt, const std::string& field, const RequestLimits& limits) {
  PromptInput p{{}, std::nullopt, field};
  if (prompt.is_string()) {
    p.text = prompt.get<std::string>();
    p.ids = tokenize(*p.text, field, limits);
  } else {
    if (prompt.empty()) bad_request(field, "is an empty list of token ids");
    p.ids = token_id_list(prompt, field, limits.vocab_size);
  }
  if (p.ids.empty()) bad_request(field, "is empty (it has no tokens)");
  return p;
}

// prompt: a string, a list of token ids, or a batch: a list of strings or of lists of token ids (each its
// own choices, prompt-major: choice index = prompt x n + i, as OpenAI's and vLLM's).
std::vector<PromptInput> parse_prompts(const JsonFields& f, const RequestLimits& limits, int n) {
  const Json* prompt = f.get("prompt");
  if (prompt == nullptr) bad_request("prompt", "is required", "missing_required_parameter");
  if (prompt->is_string()) return {one_prompt(*prompt, "prompt", limits)};
  if (!prompt->is_array())
    bad_request(
        "prompt",
        "expected a string, a list of token ids, or a list of strings or of lists of token ids, got " +
            describe_json(*prompt),
        "invalid_type");
  if (prompt->empty()) bad_request("prompt", "is an empty list");
  const Json& first = (*prompt)[0];
  if (!first.is_string() && !first.is_array()) return {one_prompt(*prompt, "prompt", limits)};
  const bool strings = first.is_string();  // a batch is all strings or all lists of ids (OpenAI's, vLLM's)
  // Every choice of every prompt takes a place in the queue (all or none).
  const int64_t sequences = static_cast<int64_t>(prompt->size()) * n;
  if (limits.max_queued_requests > 0 && sequences > limits.max_queued_requests)
    bad_request("prompt",
                std::to_string(prompt->size()) + " prompts x n = " + std::to_string(n) + " choices take " +
                    std::to_string(sequences) + " places in the queue, which holds " +
                    std::to_string(limits.max_queued_requests) + " (server.max_queued_requests)",
                "limit_exceeded");
  if (prompt->size() > static_cast<size_t>(kMaxBatchPrompts))
    bad_request("prompt",
                "a batch of " + std::to_string(prompt->size()) + " prompts; at most " +
                    std::to_string(kMaxBatchPrompts),
                "limit_exceeded");
  std::vector<PromptInput> prompts;
  for (size_t i = 0; i < prompt->size(); ++i) {
    const Json& item = (*prompt)[i];
    const std::string field = "prompt[" + std::to_string(i) + "]";
    if (strings ? !item.is_string() : !item.is_array())
      bad_request(field,
                  std::string("a batch whose first prompt is ") +
                      (strings ? "a string takes strings" : "a list of token ids takes lists of token ids") +
                      ", got " + describe_json(item),
                  "invalid_type");
    prompts.push_back(one_prompt(item, field, limits));
  }
  return prompts;
}

// A list longer than the server's max_stop_sequences: 400 limit_exceeded.
void check_list_length(const Json& list, const std::string& field, const RequestLimits& limits) {
  if (limits.max_stop_sequences > 0 && list.size() > static_cast<size_t>(limits.max_stop_sequences))
    bad_request(field,
                "has " + std::to_string(list.size()) + " entries; this server accepts at most " +
                    std::to_string(limits.max_stop_sequences),
                "limit_exceeded");
}

void check_stop_string(const Json& stop, const std::string& item, const RequestLimits& limits) {
  const auto& text = stop.get_ref<const std::string&>();
  if (text.empty()) bad_request(item, "must not be an empty string");
  if (limits.max_stop_string_bytes > 0 && text.size() > static_cast<size_t>(limits.max_stop_string_bytes))
    bad_request(item,
                "is " + std::to_string(text.size()) +
                    " bytes long; this server accepts stop strings of at most " +
                    std::to_string(limits.max_stop_string_bytes) + " bytes",
                "limit_exceeded");
}

std::vector<std::string> parse_stop(const JsonFields& f, const RequestLimits& limits) {
  const Json* stop = f.get("stop");
  if (stop == nullptr) return {};
  // Stop strings are matched in the generated text, which a server without a tokenizer does not have.
  const char* hint = ": stop strings are matched in the generated text; send stop_token_ids instead";
  if (stop->is_string()) {
    check_stop_string(*stop, "stop", limits);
    require_tokenizer(limits, "stop", hint);
    return {stop->get<std::string>()};
  }
  if (!stop->is_array())
    bad_request("stop", "expected a string or a list of strings, got " + describe_json(*stop),
                "invalid_type");
  check_list_length(*stop, "stop", limits);
  std::vector<std::string> out;
  for (size_t i = 0; i < stop->size(); ++i) {
    const std::string item = "stop[" + std::to_string(i) + "]";
    if (!(*stop)[i].is_string())
      bad_request(item, "expected a string, got " + describe_json((*stop)[i]), "invalid_type");
    check_stop_string((*stop)[i], item, limits);
    require_tokenizer(limits, item, hint);
    out.push_back((*stop)[i].get<std::string>());
  }
  return out;
}

// How many top log-probabilities a request asked for, within what the server returns.
int checked_logprobs(int64_t n, const char* field, const RequestLimits& limits) {
  if (n > limits.max_logprobs)
    bad_request(field, "must be at most " + std::to_string(limits.max_logprobs) + " on this server, got " +
                           std::to_string(n) + " (runtime.sampling_candidates bounds it)");
  return static_cast<int>(n);
}

// Sampling, stopping, streaming and the fields we refuse; shared by both endpoints. Returns the request's
// seed, if it sent one (for assign_choice_seeds once the prompts are known).
std::optional<int64_t> parse_common(const JsonFields& f, const RequestLimits& limits, ParsedRequest& out) {
  check_model(f, limits);
  SamplingParams& s = out.job.sampling;
  s.temperature = static_cast<float>(f.number("temperature", 0, 2).value_or(limits.defaults.temperature));
  s.top_p = static_cast<float>(f.number("top_p", 0, 1, true).value_or(limits.defaults.top_p));
  const int64_t top_k = f.integer("top_k", -1, kInt32Max).value_or(limits.defaults.top_k);
  s.top_k = top_k < 0 ? 0 : static_cast<int32_t>(top_k);
  s.min_p = static_cast<float>(f.number("min_p", 0, 1).value_or(limits.defaults.min_p));
  const auto seed =
      f.integer("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  const int n = static_cast<int>(f.integer("n", 1, kMaxChoices).value_or(1));
  if (limits.max_queued_requests > 0 && n > limits.max_queued_requests)
    bad_request("n",
                "each choice takes a place in the queue, which holds " +
                    std::to_string(limits.max_queued_requests) + " (server.max_queued_requests); got " +
                    std::to_string(n),
                "limit_exceeded");
  out.choices_per_prompt = n;
  out.job.stop = parse_stop(f, limits);
  if (const Json* ids = f.get("stop_token_ids")) {
    if (!ids->is_array())
      bad_request("stop_token_ids", "expected a list of token ids, got " + describe_json(*ids),
                  "invalid_type");
    check_list_length(*ids, "stop_token_ids", limits);
    out.job.stop_token_ids = token_id_list(*ids, "stop_token_ids", limits.vocab_size);
  }
  out.job.ignore_eos = f.boolean("ignore_eos").value_or(false);
  out.job.skip_special_tokens = f.boolean("skip_special_tokens").value_or(true);
  out.return_token_ids = f.boolean("return_token_ids").value_or(false) || limits.tokenizer == nullptr;

  out.stream = f.boolean("stream").value_or(false);
  if (const Json* options = f.get("stream_options")) {
    if (!out.stream) bad_request("stream_options", "is only allowed with \"stream\": true");
    JsonFields o(*options, "stream_options");
    out.include_usage = o.boolean("include_usage").value_or(false);
    // vLLM's: every chunk carries its choice's usage so far (with include_usage only).
    out.continuous_usage = o.boolean("continuous_usage_stats").value_or(false) && out.include_usage;
  }

  out.job.processing = parse_logit_processing(f, limits.vocab_size, limits.defaults.repetition_penalty);
  out.job.structured = parse_structured_output(f, limits.grammars.get());
  f.string("user");  // accepted and ignored
  return seed;
}

// Every choice's seed (ParsedRequest::seeds) for out.jobs: seed + i (wrapping) for choice i of each prompt
// where the request sent one, so that every choice is reproducible; else a fresh one each (the same prompt
// sent twice in a batch gives two samples).
// Each job keeps its first choice's seed, as a request with n = 1 runs it.
void assign_choice_seeds(ParsedRequest& out, std::optional<int64_t> seed) {
  for (size_t p = 0; p < out.jobs.size(); ++p) {
    for (int i = 0; i < out.choices_per_prompt; ++i)
      out.seeds.push_back(seed ? static_cast<int64_t>(static_cast<uint64_t>(*seed) + static_cast<uint64_t>(i))
                               : fresh_seed());
    out.jobs[p].sampling.seed = out.seeds[p * out.choices_per_prompt];
  }
  out.job.sampling.seed = out.seeds.front();
}

// max_tokens absent: all the room left (at most the server's max_output_tokens). Too long: a 400 that says
// by how much.
void resolve_max_tokens(std::optional<int64_t> max_tokens, const std::string& field,
                        const std::string& prompt_field, const RequestLimits& limits, GenerationJob& job) {
  const int64_t prompt = static_cast<int64_t>(job.prompt.size());
  if (limits.max_prompt_tokens > 0 && prompt > limits.max_prompt_tokens)
    bad_request(prompt_field,
                "the prompt has " + std::to_string(prompt) +
                    " tokens; this server accepts prompts of at most " +
                    std::to_string(limits.max_prompt_tokens) + " tokens",
                "limit_exceeded");
  if (max_tokens && limits.max_output_tokens > 0 && *max_tokens > limits.max_output_tokens)
    bad_request(field,
                "is " + std::to_string(*max_tokens) + "; this server generates at most " +
                    std::to_string(limits.max_output_tokens) + " tokens per request",
                "limit_exceeded");
  const int64_t room = limits.max_context_tokens - prompt;
  if (room < 1)
    bad_request(prompt_field,
                "the prompt has " + std::to_string(prompt) + " tokens; this server's context is " +
                    std::to_string(limits.max_context_tokens) +
                    " tokens (prompt + generated), which leaves no room to generate",
                "context_length_exceeded");
  if (max_tokens && *max_tokens > room)
    bad_request(field,
                "the prompt has " + std::to_string(prompt) + " tokens and " + field + " is " +
                    std::to_string(*max_tokens) + ": together more than this server's context of " +
                    std::to_string(limits.max_context_tokens) + " tokens (at most " + std::to_string(room) +
                    " can be generated)",
                "context_length_exceeded");
  const int64_t default_tokens =
      limits.max_output_tokens > 0 ? std::min(room, limits.max_output_tokens) : room;
  job.max_tokens = static_cast<int>(max_tokens.value_or(default_tokens));
  check_min_tokens(job.processing, job.max_tokens, max_tokens ? field.c_str() : "the room left");
}

// tool_choice "required" or a named function: the answer follows the tools' schema (as structured output,
// the request's only rule) and is parsed into tool calls.
void force_tool_calls(const ToolChoice& choice, const JsonFields& f, const RequestLimits& limits,
                      ParsedRequest& out) {
  if (out.job.structured)
    bad_request("tool_choice",
                "a forced tool call fixes the answer's form; it cannot be combined with response_format or "
                "another structured output rule");
  if (limits.grammars == nullptr)
    bad_request("tool_choice", "a forced tool call needs the server's tokenizer", "tokenizer_unavailable");
  const ForcedToolSchema schema = forced_tool_schema(choice, f);
  out.job.structured = json_schema_grammar(schema.schema, schema.field, *limits.grammars);
  out.chat_output.forced = choice.kind == ToolChoice::Kind::kNamed ? ChatOutputOptions::Forced::kNamed
                                                                   : ChatOutputOptions::Forced::kList;
  out.chat_output.forced_name = choice.name;
}

}  // namespace

const Tokenizer& require_tokenizer(const RequestLimits& limits, const std::string& field, const char* hint) {
  if (limits.tokenizer == nullptr)
    bad_request(field,
                std::string("this server has no tokenizer (see model.tokenizer in docs/config.md)") + hint,
                "tokenizer_unavailable");
  return *limits.tokenizer;
}

std::vector<int32_t> token_id_list(const nlohmann::ordered_json& list, const std::string& path,
                                   int32_t vocab_size) {
  std::vector<int32_t> ids;
  ids.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    int64_t id = -1;
    const std::string item = path + "[" + std::to_string(i) + "]";
    if (!json_to_int64(list[i], id))
      bad_request(item, "expected a token id (integer), got " + describe_json(list[i]), "invalid_type");
    if (id < 0 || id >= vocab_size)
      bad_request(item, "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                            std::to_string(vocab_size) + ")");
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

void check_model(const JsonFields& f, const RequestLimits& limits) {
  const auto model = f.string("model");
  if (model && *model != limits.model_name)
    throw ApiError(404,
                   "model '" + *model + "' does not exist; this server serves '" + limits.model_name + "'",
                   "model", "model_not_found");
}

ParsedRequest parse_completion_request(const std::string& body, const RequestLimits& limits) {
  const Json doc = parse_json_body(body);
  const JsonFields f(doc, "");
  ParsedRequest out;
  const std::optional<int64_t> seed = parse_common(f, limits, out);
  const bool echo = f.boolean("echo").value_or(false);
  if (const auto n = f.integer("logprobs", 0, 20)) {
    if (echo)
      bad_request("echo",
                  "with logprobs it needs the prompt's log-probabilities, which this server does not compute",
                  "unsupported_parameter");
    out.job.logprobs = checked_logprobs(*n, "logprobs", limits);
  }
  f.integer("best_of", 1, 128);
  f.refuse_unless_neutral("best_of", 1, "only best_of = 1");
  f.string("suffix");
  f.refuse_unless_neutral("suffix", nullptr, "suffixes are not implemented");
  const auto max_tokens = f.integer("max_tokens", 1, kInt32Max);
  for (PromptInput& p : parse_prompts(f, limits, out.choices_per_prompt)) {
    GenerationJob job = out.job;
    job.prompt = std::move(p.ids);
    resolve_max_tokens(max_tokens, "max_tokens", p.field, limits, job);
    if (echo) {
      // The prompt as given, or its ids' text (special tokens included, as /detokenize gives it).
      out.echo.push_back(p.text ? *p.text
                                : require_tokenizer(limits, "echo", ": send the prompt as text")
                                      .decode(job.prompt, /*skip_special_tokens=*/false));
    }
    out.jobs.push_back(std::move(job));
  }
  out.job = out.jobs.front();
  assign_choice_seeds(out, seed);
  return out;
}

ParsedRequest parse_chat_request(const std::string& body, const RequestLimits& limits) {
  const Json doc = parse_json_body(body);
  const JsonFields f(doc, "");
  ParsedRequest out;
  const std::optional<int64_t> seed = parse_common(f, limits, out);
  const bool logprobs = f.boolean("logprobs").value_or(false);
  const auto top = f.integer("top_logprobs", 0, 20);
  if (top && *top > 0 && !logprobs) bad_request("top_logprobs", "needs logprobs: true");
  if (logprobs) out.job.logprobs = checked_logprobs(top.value_or(0), "top_logprobs", limits);
  f.boolean("echo");
  f.refuse_unless_neutral("echo", false, "echoing the prompt is not implemented");
  const ChatPrompt prompt = parse_chat_prompt(f);
  out.job.prompt = tokenize(prompt.text, "messages", limits);
  const ToolChoice& tool_choice = prompt.tool_choice;
  if (tool_choice.forced()) force_tool_calls(tool_choice, f, limits, out);
  out.chat_output.reasoning = limits.parse_reasoning;
  // With the reasoning parsed out, the rule applies to the answer after it (vLLM's): from the token after
  // </think>, unless the template closed the reasoning block already.
  if (out.job.structured && limits.parse_reasoning && chat_thinks(f))
    out.job.structured_begin_after = limits.tokenizer->token_id("</think>");
  out.chat_output.tool_calls = limits.parse_tool_calls && tool_choice.free_tool_calls();
  const auto max_tokens = f.integer("max_tokens", 1, kInt32Max);
  const auto max_completion_tokens = f.integer("max_completion_tokens", 1, kInt32Max);
  resolve_max_tokens(max_completion_tokens ? max_completion_tokens : max_tokens,
                     max_completion_tokens ? "max_completion_tokens" : "max_tokens", "messages", limits,
                     out.job);
  out.jobs = {out.job};
  assign_choice_seeds(out, seed);
  return out;
}

}  // namespace tpserve::serve
