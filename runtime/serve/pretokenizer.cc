#include "runtime/serve/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>
#include <string>

#include "common/error.h"

namespace tpserve::serve {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

pcre2_code* as_code(void* p) {
  return static_cast<pcre2_code*>(p);
}

// Unicode's White_Space (PropList.txt), as the inside of a character class.
constexpr const char* kWhiteSpace =
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

}  // namespace

std::string with_unicode_whitespace(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size() && pattern[i + 1] == 'Q') {  // \Q...\E: literal text, as it is
      const size_t end = pattern.find("\\E", i + 2);
      const size_t stop = end == std::string::npos ? pattern.size() : end + 2;
      out.append(pattern, i, stop - i);
      i = stop - 1;
      continue;
    }
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's')
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      else if (e == 'S' && !in_class)
        out += "[^" + std::string(kWhiteSpace) + "]";
      else
        out += {c, e};
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];  // a literal ] first
    } else if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t end = pattern.find(":]", i + 2);  // a POSIX class such as [:alpha:]
      if (end != std::string::npos) out.append(pattern, i + 1, end + 2 - (i + 1)), i = end + 1;
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  return out;
}

Pretokenizer::Pretokenizer(const std::string& original) {
  const std::string pattern = with_unicode_whitespace(original);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  TPS_CHECK(code != nullptr, "tokenizer pre-tokenizer regex does not compile at offset ", offset, ": ",
            pcre2_message(error), " (pattern: ", original, ")");
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Pretokenizer::~Pretokenizer() {
  pcre2_code_free(as_code(code_));
}

void Pretokenizer::split(std::string_view text, std::vector<std::string_view>& pieces) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(as_code(code_), nullptr), &pcre2_match_data_free);
  TPS_CHECK(match != nullptr, "pre-tokenizer: out of memory for PCRE2 match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t unmatched = 0;  // start of the text not yet covered by a piece
  size_t search = 0;
  while (search < text.size()) {
    // The caller validated the text as UTF-8; skip PCRE2's check on every call.
    const int rc =
        pcre2_match(as_code(code_), subject, text.size(), search, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    TPS_CHECK(rc > 0, "pre-tokenizer: PCRE2 match failed: ", pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    const size_t begin = ovector[0], end = ovector[1];
    if (end == begin) {  // an empty match splits nothing: search again one code point further
      search = begin + 1;
      while (search < text.size() && (static_cast<unsigned char>(text[search]) & 0xC0) == 0x80) ++search;
      continue;
    }
    if (begin > unmatched) pieces.push_back(text.substr(unmatched, begin - unmatched));
    pieces.push_back(text.substr(begin, end - begin));
    unmatched = search = end;
  }
  if (unmatched < text.size()) pieces.push_back(text.substr(unmatched));
}

}  // namespace tpserve::serve
