#include "runtime/serve/utf8.h"

#include <cstdint>

namespace tpserve::serve {
namespace {

struct Sequence {
  size_t length;   // bytes consumed: the whole sequence, or the maximal ill-formed subpart
  bool complete;   // a well-formed sequence
  bool truncated;  // well-formed so far but the bytes ended
  char32_t cp;
};

// Reads one sequence at text[i] following the well-formed byte ranges of Unicode's Table 3-7.
Sequence next_sequence(std::string_view text, size_t i) {
  const auto b0 = static_cast<uint8_t>(text[i]);
  if (b0 < 0x80) return {1, true, false, b0};
  int need = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  char32_t cp = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1, cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2, cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3, cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {1, false, false, 0};  // a continuation byte or C0, C1, F5..FF: never a lead
  }
  size_t length = 1;
  for (int k = 0; k < need; ++k) {
    if (i + length >= text.size()) return {length, false, true, 0};
    const auto b = static_cast<uint8_t>(text[i + length]);
    if (b < lo || b > hi) return {length, false, false, 0};
    lo = 0x80, hi = 0xBF;
    cp = (cp << 6) | (b & 0x3F);
    ++length;
  }
  return {length, true, false, cp};
}

}  // namespace

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool decode_utf8(std::string_view text, std::vector<char32_t>& out) {
  out.clear();
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const Sequence s = next_sequence(text, i);
    if (!s.complete) return false;
    out.push_back(s.cp);
    i += s.length;
  }
  return true;
}

bool is_valid_utf8(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    const Sequence s = next_sequence(bytes, i);
    if (!s.complete) return false;
    i += s.length;
  }
  return true;
}

std::string repair_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const Sequence s = next_sequence(bytes, i);
    if (s.complete)
      out.append(bytes.substr(i, s.length));
    else
      append_utf8(out, 0xFFFD);
    i += s.length;
  }
  return out;
}

size_t utf8_incomplete_tail(std::string_view bytes) {
  const size_t n = bytes.size();
  for (size_t start = n > 3 ? n - 3 : 0; start < n; ++start) {
    const auto b = static_cast<uint8_t>(bytes[start]);
    if (b < 0xC2 || b > 0xF4) continue;  // only a lead byte starts a sequence
    if (next_sequence(bytes, start).truncated) return n - start;
  }
  return 0;
}

}  // namespace tpserve::serve
