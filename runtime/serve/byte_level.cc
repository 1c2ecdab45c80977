#include "runtime/serve/byte_level.h"

#include <vector>

#include "runtime/serve/utf8.h"

namespace tpserve::serve {

ByteLevelAlphabet::ByteLevelAlphabet() {
  code_point_to_byte_.fill(-1);
  // bytes_to_unicode() of GPT-2: '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves; the other
  // 68 bytes take U+0100, U+0101, ... in byte order.
  auto keeps_itself = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = keeps_itself(b) ? static_cast<char32_t>(b) : next++;
    append_utf8(byte_to_text_[b], cp);
    code_point_to_byte_[cp] = static_cast<int16_t>(b);
  }
}

std::string ByteLevelAlphabet::encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += byte_to_text_[static_cast<uint8_t>(c)];
  return out;
}

std::optional<std::string> ByteLevelAlphabet::decode(std::string_view text) const {
  std::vector<char32_t> cps;
  if (!decode_utf8(text, cps)) return std::nullopt;
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) {
    if (cp >= code_point_to_byte_.size() || code_point_to_byte_[cp] < 0) return std::nullopt;
    out += static_cast<char>(code_point_to_byte_[cp]);
  }
  return out;
}

}  // namespace tpserve::serve
