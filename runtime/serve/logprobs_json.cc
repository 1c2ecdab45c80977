#include "runtime/serve/logprobs_json.h"

#include <cmath>

#include "runtime/serve/tokenizer.h"
#include "runtime/serve/utf8.h"

namespace tpserve::serve {
namespace {

using Json = nlohmann::ordered_json;

LogprobEntry entry(int32_t id, float logprob, const Tokenizer* tokenizer) {
  if (tokenizer == nullptr) return {"token_id:" + std::to_string(id), "", logprob};
  const std::string& bytes = tokenizer->token_bytes(id);
  return {repair_utf8(bytes), bytes, logprob};
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
    Json top = Json::object();
    for (const LogprobEntry& e : t.top) top[e.token] = finite(e.logprob);
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += t.drawn.token.size();
  }
  return {{"tokens", std::move(names)},
          {"token_logprobs", std::move(logprobs)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

}  // namespace tpserve::serve
