#include "runtime/serve/openai_response.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

namespace tpserve::serve {
namespace {

using Json = nlohmann::ordered_json;

std::string random_hex_id() {
  static const uint64_t base = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  char buffer[33];
  std::snprintf(buffer, sizeof(buffer), "%016llx%08llx", static_cast<unsigned long long>(base),
                static_cast<unsigned long long>(counter.fetch_add(1) & 0xFFFFFFFFull));
  return buffer;
}

const char* object_name(Endpoint e, bool chunk) {
  if (e == Endpoint::kChatCompletions) return chunk ? "chat.completion.chunk" : "chat.completion";
  return "text_completion";
}

Json header_fields(const ResponseHeader& h, bool chunk) {
  return {
      {"id", h.id}, {"object", object_name(h.endpoint, chunk)}, {"created", h.created}, {"model", h.model}};
}

Json finish_json(const std::optional<std::string>& reason) {
  return reason ? Json(*reason) : Json();
}

// The chat message or delta fields of `answer`: content (always in a message; in a delta when not empty, or
// as "" in a first delta that ends nothing), reasoning_content and tool_calls where there are some.
void put_chat_parts(Json& message, const AnswerParts& answer, bool delta, bool empty_content) {
  if (!delta)
    message["content"] = answer.content.empty() && !answer.tool_calls.empty() ? Json() : Json(answer.content);
  else if (!answer.content.empty() || empty_content)
    message["content"] = answer.content;
  if (!answer.reasoning.empty()) message["reasoning_content"] = answer.reasoning;
  if (answer.tool_calls.empty()) return;
  Json calls = Json::array();
  for (const ToolCall& call : answer.tool_calls) {
    Json c = Json::object();
    if (delta) c["index"] = call.index;
    c["id"] = call.id;
    c["type"] = "function";
    c["function"] = {{"name", call.name}, {"arguments", call.arguments}};
    calls.push_back(std::move(c));
  }
  message["tool_calls"] = std::move(calls);
}

// A choice's "logprobs": null unless the request asked.
Json logprobs_json(const ResponseHeader& h, const std::vector<TokenLogprob>& tokens, size_t text_offset) {
  if (!h.logprobs) return nullptr;
  return h.endpoint == Endpoint::kChatCompletions ? chat_logprobs_json(tokens)
                                                  : completion_logprobs_json(tokens, text_offset);
}

}  // namespace

void AnswerParts::append(AnswerParts&& later) {
  content += later.content;
  reasoning += later.reasoning;
  for (ToolCall& call : later.tool_calls) tool_calls.push_back(std::move(call));
}

ResponseHeader make_response_header(Endpoint endpoint, const std::string& model, bool return_token_ids) {
  ResponseHeader h;
  h.endpoint = endpoint;
  h.id = (endpoint == Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-") + random_hex_id();
  h.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  h.model = model;
  h.return_token_ids = return_token_ids;
  return h;
}

Json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

std::string new_tool_call_id() {
  return "call_" + random_hex_id();
}

Json full_response(const ResponseHeader& h, const std::vector<Choice>& choices, const Usage& usage) {
  Json list = Json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const Choice& c = choices[i];
    Json choice = {{"index", static_cast<int>(i)}};
    if (h.endpoint == Endpoint::kChatCompletions) {
      Json message = {{"role", "assistant"}};
      put_chat_parts(message, c.answer, false, false);
      choice["message"] = std::move(message);
    } else {
      choice["text"] = c.answer.content;
    }
    choice["logprobs"] = logprobs_json(h, c.logprobs, 0);
    choice["finish_reason"] = c.finish_reason;
    if (h.return_token_ids) choice["token_ids"] = c.token_ids;
    list.push_back(std::move(choice));
  }
  Json out = header_fields(h, false);
  out["choices"] = std::move(list);
  out["usage"] = usage_json(usage);
  return out;
}

Json stream_chunk(const ResponseHeader& h, int index, const AnswerParts& piece,
                  const std::vector<int32_t>& token_ids, bool first,
                  const std::optional<std::string>& finish_reason, const std::vector<TokenLogprob>& logprobs,
                  size_t text_offset) {
  Json choice = {{"index", index}};
  if (h.endpoint == Endpoint::kChatCompletions) {
    Json delta = Json::object();
    if (first) delta["role"] = "assistant";
    put_chat_parts(delta, piece, true, first && !finish_reason);
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = piece.content;
  }
  choice["logprobs"] = logprobs.empty() ? Json(nullptr) : logprobs_json(h, logprobs, text_offset);
  choice["finish_reason"] = finish_json(finish_reason);
  if (h.return_token_ids) choice["token_ids"] = token_ids;
  Json out = header_fields(h, true);
  out["choices"] = Json::array({choice});
  return out;
}

Json usage_chunk(const ResponseHeader& h, const Usage& usage) {
  Json out = header_fields(h, true);
  out["choices"] = Json::array();
  out["usage"] = usage_json(usage);
  return out;
}

Json model_list(const std::string& model, int64_t created, int64_t max_model_len) {
  Json card = {{"id", model},
               {"object", "model"},
               {"created", created},
               {"owned_by", "tpserve"},
               {"root", model},
               {"parent", nullptr},
               {"max_model_len", max_model_len}};
  return {{"object", "list"}, {"data", Json::array({card})}};
}

std::string sse_event(const Json& payload) {
  // Non-ASCII stays as UTF-8 (valid by construction); invalid bytes would be replaced, never thrown on.
  return "data: " + payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

}  // namespace tpserve::serve
