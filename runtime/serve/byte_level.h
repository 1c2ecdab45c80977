// GPT-2's byte-level alphabet: every byte maps to one printable code point (printable ASCII and most of
// Latin-1 map to themselves, the rest to U+0100 and up), so that BPE tokens are text. Qwen's tokenizer.json
// stores its vocabulary and merges in this alphabet.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tpserve::serve {

class ByteLevelAlphabet {
 public:
  ByteLevelAlphabet();
  // The UTF-8 encoding of the code point that stands for the byte.
  const std::string& encode_byte(uint8_t byte) const { return byte_to_text_[byte]; }
  // Bytes -> byte-level text.
  std::string encode(std::string_view bytes) const;
  // Byte-level text -> bytes; nullopt when a character is outside the alphabet.
  std::optional<std::string> decode(std::string_view text) const;

 private:
  std::array<std::string, 256> byte_to_text_;
  std::array<int16_t, 324> code_point_to_byte_;  // the alphabet's code points are all below 324; -1 = none
};

}  // namespace tpserve::serve
