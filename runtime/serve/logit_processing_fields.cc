#include "runtime/serve/logit_processing_fields.h"

#include <cctype>
#include <limits>
#include <string>
#include <unordered_set>

#include "runtime/serve/api_error.h"

namespace tpserve::serve {
namespace {

using Json = nlohmann::ordered_json;

// A logit_bias key: a token id written in decimal (OpenAI sends them as strings: JSON keys).
int32_t bias_token(const std::string& key, int32_t vocab_size) {
  const std::string field = "logit_bias." + key;
  bool digits = !key.empty() && key.size() <= 10;
  for (char c : key) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (!digits) bad_request(field, "keys must be token ids (decimal integers), got '" + key + "'");
  const int64_t id = std::stoll(key);
  if (id >= vocab_size)
    bad_request(field, "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                           std::to_string(vocab_size) + ")");
  return static_cast<int32_t>(id);
}

}  // namespace

LogitProcessing parse_logit_processing(const JsonFields& f, int32_t vocab_size, double default_repetition) {
  LogitProcessing p;
  p.presence_penalty = static_cast<float>(f.number("presence_penalty", -2, 2).value_or(0.0));
  p.frequency_penalty = static_cast<float>(f.number("frequency_penalty", -2, 2).value_or(0.0));
  p.repetition_penalty =
      static_cast<float>(f.number("repetition_penalty", kMinRepetitionPenalty, kMaxRepetitionPenalty)
                             .value_or(default_repetition));
  p.min_tokens =
      static_cast<int>(f.integer("min_tokens", 0, std::numeric_limits<int32_t>::max()).value_or(0));
  if (const Json* bias = f.get("logit_bias")) {
    if (!bias->is_object())
      bad_request("logit_bias", "expected an object of token id -> bias, got " + describe_json(*bias),
                  "invalid_type");
    if (bias->size() > static_cast<size_t>(kMaxLogitBiasTokens))
      bad_request("logit_bias",
                  "names " + std::to_string(bias->size()) + " tokens; this server accepts at most " +
                      std::to_string(kMaxLogitBiasTokens),
                  "limit_exceeded");
    std::unordered_set<int32_t> seen;  // "5" and "05" name one token
    for (const auto& [key, value] : bias->items()) {
      const int32_t token = bias_token(key, vocab_size);
      const std::string field = "logit_bias." + key;
      if (!value.is_number())
        bad_request(field, "expected a number in [-100, 100], got " + describe_json(value), "invalid_type");
      const double v = value.get<double>();
      if (!(v >= -100 && v <= 100)) bad_request(field, "must be in [-100, 100], got " + value.dump());
      if (!seen.insert(token).second)
        bad_request(field, "names token " + std::to_string(token) + " a second time");
      if (v != 0) p.logit_bias.emplace_back(token, static_cast<float>(v));
    }
  }
  return p;
}

void check_min_tokens(const LogitProcessing& p, int max_tokens, const char* max_tokens_field) {
  if (p.min_tokens > max_tokens)
    bad_request("min_tokens", "is " + std::to_string(p.min_tokens) + ", more than " + max_tokens_field +
                                  " (" + std::to_string(max_tokens) + ")");
}

}  // namespace tpserve::serve
