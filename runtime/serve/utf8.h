// UTF-8 helpers for the tokenizer and the streaming path: decoding to code points, encoding, repairing
// invalid bytes with U+FFFD (one per maximal ill-formed subpart, as Python's errors="replace" and the WHATWG
// decoder do), and finding an incomplete sequence at the end of a buffer, which a stream must hold back.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tpserve::serve {

// Appends the UTF-8 encoding of a code point (must be a Unicode scalar value).
void append_utf8(std::string& out, char32_t cp);

// Decodes valid UTF-8 into code points; returns false (out unspecified) at the first ill-formed byte.
bool decode_utf8(std::string_view text, std::vector<char32_t>& out);

bool is_valid_utf8(std::string_view bytes);

// Valid UTF-8 with every ill-formed subpart replaced by U+FFFD; an incomplete sequence at the end counts
// as ill-formed (use utf8_incomplete_tail first when more bytes may follow).
std::string repair_utf8(std::string_view bytes);

// Length (0..3) of the longest suffix that is the start of a well-formed sequence missing only its last
// byte(s): the bytes a stream must hold back until more arrive.
size_t utf8_incomplete_tail(std::string_view bytes);

// The value of a hex digit (0-9, a-f, A-F), or -1: the escapes of regexes, grammars and JSON.
inline int hex_value(char32_t c) {
  if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a') + 10;
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A') + 10;
  return -1;
}

}  // namespace tpserve::serve
