#include "runtime/serve/tokenize_request.h"

#include <vector>

#include "runtime/serve/api_error.h"
#include "runtime/serve/chat_request.h"

namespace tpserve::serve {
using Json = nlohmann::ordered_json;

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
    ids = require_tokenizer(limits, "prompt").encode(prompt->get_ref<const std::string&>());
  } else {
    const std::string text = parse_chat_prompt(f).text;
    ids = require_tokenizer(limits, "messages").encode(text);
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
  const Tokenizer& tokenizer = require_tokenizer(limits, "tokens");
  const std::vector<int32_t> ids = token_id_list(*tokens, "tokens", tokenizer.vocab_size());
  return Json{{"prompt", tokenizer.decode(ids, /*skip_special_tokens=*/false)}};
}

}  // namespace tpserve::serve
