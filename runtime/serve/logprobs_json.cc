#include "runtime/serve/logprobs_json.h"

#include <cmath>

#include "runtime/serve/tokenizer.h"
#include "runtime/serve/utf8.h"

namespace tpserve::serve {
namespace {

using Json = nlohmann::ordered_json;

LogprobEntry entry(int32_t id, float logprob, const Tokenizer* tokenizer) {
  // Without a tokenizer, or for ids it does not have (the model's vocabulary may be larger): the id.
  const std::string* bytes = tokenizer != nullptr ? &tokenizer->token_bytes(id) : nullptr;
  if (bytes == nullptr || bytes->empty()) return {"token_id:" + std::to_string(id), "", logprob};
  return {repair_utf8(*bytes), *bytes, logprob};
}

// Characters (code points) of a valid UTF-8 string: OpenAI's and vLLM's text offsets count them.
size_t characters(const std::string& text) {
  size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

Json bytes_json(const LogprobEntry& e) {
  if (e.bytes.empty()) return nullptr;
  Json list = Json::array();
  for (unsigned char b : e.bytes) list.push_back(static_cast<int>(b));
  return list;
}

// JSON numbers cannot be -inf (a token the model gives no chance at all): OpenAI's clients read -9999.0.
double finite(float logprob) {
  return std::isfinite(logprob) ? static_cast<double>(logprob) : -9999.0;
}

}  // namespace

size_t completion_text_length(const TokenLogprob& t) {
  return characters(t.drawn.token);
}

TokenLogprob describe_logprobs(int32_t token, const TokenLogprobs& lp, const Tokenizer* tokenizer) {
  TokenLogprob out{entry(token, lp.logprob, tokenizer), {}};
  for (const auto& [id, logprob] : lp.top) out.top.push_back(entry(id, logprob, tokenizer));
  return out;
}

Json chat_logprobs_json(const std::vector<TokenLogprob>& tokens) {
  Json content = Json::array();
  for (const TokenLogprob& t : tokens) {
    Json top = Json::array();
    for (const LogprobEntry& e : t.top)
      top.push_back({{"token", e.token}, {"logprob", finite(e.logprob)}, {"bytes", bytes_json(e)}});
    content.push_back({{"token", t.drawn.token},
                       {"logprob", finite(t.drawn.logprob)},
                       {"bytes", bytes_json(t.drawn)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

Json completion_logprobs_json(const std::vector<TokenLogprob>& tokens, size_t text_offset) {
  Json names = Json::array(), logprobs = Json::array(), tops = Json::array(), offsets = Json::array();
  for (const TokenLogprob& t : tokens) {
    names.push_back(t.drawn.token);
    logprobs.push_back(finite(t.drawn.logprob));
    // Keyed by token text: where two tokens show the same text (parts of characters), the first (more
    // likely) keeps its place. The drawn token is always there too, as OpenAI's legacy API has it.
    Json top = Json::object();
    for (const LogprobEntry& e : t.top)
      if (!top.contains(e.token)) top[e.token] = finite(e.logprob);
    if (!top.contains(t.drawn.token)) top[t.drawn.token] = finite(t.drawn.logprob);
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += completion_text_length(t);
  }
  return {{"tokens", std::move(names)},
          {"token_logprobs", std::move(logprobs)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

}  // namespace tpserve::serve
