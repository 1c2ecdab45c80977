#include "runtime/serve/tokenize_request.h"

#include <vector>

#include "runtime/serve/api_error.h"
#include "runtime/serve/chat_request.h"

namespace tpserve::serve {
namespace {

using Json = nlohmann::ordered_json;

const Tokenizer& tokenizer_or_400(const RequestLimits& limits, const std::string& field) {
  if (limits.tokenizer == nullptr)
    bad_request(field, "this server has no tokenizer (see model.tokenizer in docs/config.md)",
                "tokenizer_unavailable");
  return *limits.tokenizer;
}

}  // namespace

Json tokenize_response(const std::string& body, const RequestLimits& limits) {
  const Json doc = parse_json_body(body);
  const JsonFields f(doc, "");
  check_model(f, limits);
  f.boolean("add_special_tokens");  // type-checked; Qwen3's tokenizer adds none either way
  const Json* prompt = f.get("prompt");
  const Json* messages = f.get("messages");
  if ((prompt == nullptr) == (messages == nullptr))
    bad_request(prompt == nullptr ? "prompt" : "messages",
                "give exactly one of \"prompt\" (text) and \"messages\" (a chat)",
                prompt == nullptr ? "missing_required_parameter" : "invalid_value");
  std::vector<int32_t> ids;
  if (prompt != nullptr) {
    if (!prompt->is_string())
      bad_request("prompt", "expected a string, got " + describe_json(*prompt), "invalid_type");
    ids = tokenizer_or_400(limits, "prompt").encode(prompt->get_ref<const std::string&>());
  } else {
    const std::string text = parse_chat_prompt(f);
    ids = tokenizer_or_400(limits, "messages").encode(text);
  }
  Json out;
  out["tokens"] = ids;
  out["count"] = ids.size();
  out["max_model_len"] = limits.max_context_tokens;
  return out;
}

Json detokenize_response(const std::string& body, const RequestLimits& limits) {
  const Json doc = parse_json_body(body);
  const JsonFields f(doc, "");
  check_model(f, limits);
  const Json* tokens = f.get("tokens");
  if (tokens == nullptr) bad_request("tokens", "is required", "missing_required_parameter");
  if (!tokens->is_array())
    bad_request("tokens", "expected a list of token ids, got " + describe_json(*tokens), "invalid_type");
  const Tokenizer& tokenizer = tokenizer_or_400(limits, "tokens");
  std::vector<int32_t> ids;
  ids.reserve(tokens->size());
  for (size_t i = 0; i < tokens->size(); ++i) {
    const std::string item = "tokens[" + std::to_string(i) + "]";
    int64_t id = -1;
    if (!json_to_int64((*tokens)[i], id))
      bad_request(item, "expected a token id (integer), got " + describe_json((*tokens)[i]), "invalid_type");
    if (id < 0 || id >= tokenizer.vocab_size())
      bad_request(item, "token id " + std::to_string(id) + " is outside the tokenizer's vocabulary [0, " +
                            std::to_string(tokenizer.vocab_size()) + ")");
    ids.push_back(static_cast<int32_t>(id));
  }
  return Json{{"prompt", tokenizer.decode(ids, /*skip_special_tokens=*/false)}};
}

}  // namespace tpserve::serve
