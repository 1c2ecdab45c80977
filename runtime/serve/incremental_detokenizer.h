// IncrementalDetokenizer: turns a stream of token ids into text pieces that are always valid UTF-8. A token
// may end inside a multi-byte character (byte-level BPE splits them freely); those bytes are held back until
// the character completes. Concatenating every push() and finish() gives exactly Tokenizer::decode of all
// the ids (ill-formed bytes become U+FFFD in both).
#pragma once

#include <cstdint>
#include <string>

#include "runtime/serve/tokenizer.h"

namespace tpserve::serve {

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
      : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

  // Adds one token; returns the text completed by it (possibly empty).
  std::string push(int32_t id);
  // End of the stream: bytes still held back (an unfinished character) as U+FFFD, else empty.
  std::string finish();
  // Bytes held back now (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;
};

}  // namespace tpserve::serve
