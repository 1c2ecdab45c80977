// Unicode Normalization Form C (canonical decomposition, canonical ordering, canonical composition), the
// normalizer of Qwen's tokenizer.json. Tables come from the Unicode Character Database through
// make_nfc_tables.py (unicode_nfc_tables.inc); Hangul syllables are handled algorithmically.
#pragma once

#include <string>
#include <string_view>

namespace tpserve::serve {

// True when the text is trivially NFC (every code point below U+0300, e.g. ASCII and Latin-1).
bool is_trivially_nfc(std::string_view utf8);

// NFC of valid UTF-8 text (the input is returned unchanged when trivially NFC). Throws tpserve::Error on
// ill-formed UTF-8.
std::string to_nfc(std::string_view utf8);

// Canonical combining class of a code point (0 for starters), for tests.
int canonical_combining_class(char32_t cp);

}  // namespace tpserve::serve
