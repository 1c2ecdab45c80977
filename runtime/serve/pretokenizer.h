// Pre-tokenizer: splits normalized text into the pieces BPE runs on, with the regex of the tokenizer.json
// (Qwen's needs Unicode properties and lookahead), compiled once with PCRE2 in UTF + UCP mode, JIT-compiled
// where PCRE2 supports it. Matches are "Isolated": every match is a piece and so is any text between
// matches. Thread-safe: each call uses its own match data.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tpserve::serve {

// The pattern with \s and \S as Unicode's White_Space property, as Hugging Face's tokenizers read them:
// PCRE2's \s in UCP mode also matches U+180E MONGOLIAN VOWEL SEPARATOR (whitespace before Unicode 6.3),
// which split text differently from tokenizers.js and gave other token ids. (JavaScript's \s also matches
// U+FEFF, which White_Space does not: not followed here.) Other escapes, \Q...\E, character classes and
// their nesting are copied as they are; \S inside a class is kept.
std::string with_unicode_whitespace(const std::string& pattern);

class Pretokenizer {
 public:
  // Throws tpserve::Error naming the pattern and PCRE2's message when it does not compile.
  explicit Pretokenizer(const std::string& pattern);
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  // Appends the pieces of valid UTF-8 text; they cover the text exactly, in order.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;
  bool jit() const { return jit_; }

 private:
  void* code_ = nullptr;  // pcre2_code_8
  bool jit_ = false;
};

}  // namespace tpserve::serve
