// StopStringMatcher: finds stop strings in generated text across token boundaries. Text is released only
// once it cannot be the start of a stop string; when a stop string appears, the text before it is released
// and the rest (the stop string included) is dropped, as OpenAI's API does.
#pragma once

#include <string>
#include <vector>

namespace tpserve::serve {

class StopStringMatcher {
 public:
  // Stop strings must be non-empty (the API layer rejects empty ones).
  explicit StopStringMatcher(std::vector<std::string> stops);

  // Adds generated text; returns the text now safe to emit. With may_stop false (before min_tokens) the
  // text cannot end a stop string: only a stop string that ends in text pushed with may_stop counts, as
  // vLLM checks stop strings only from min_tokens on.
  std::string push(const std::string& text, bool may_stop = true);
  // The generation ended without a stop string: returns the text held back.
  std::string flush();
  bool stopped() const { return stopped_; }
  // The stop string that matched (empty while none has).
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  size_t unarmed_ = 0;  // leading bytes of pending_ pushed with may_stop false
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace tpserve::serve
