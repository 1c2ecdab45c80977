#include "runtime/serve/json_value_automaton.h"

#include "common/counter_hash.h"
#include "common/error.h"
#include "runtime/serve/utf8.h"

namespace tpserve::serve {
namespace {

// Where in the grammar the text is (JsonValueState::mode).
enum Mode : uint8_t {
  kValue,         // a value must come: top level, after ':', after ',' in an array
  kArrayFirst,    // after '[': a value or ']'
  kObjectFirst,   // after '{': a key or '}'
  kKey,           // after ',' in an object: a key
  kColon,         // after a key
  kAfterValue,    // after a value: ',' or the closing bracket; at top level only whitespace
  kString,        // in a string (in_key tells which kind)
  kEscape,        // after '\' in a string
  kHex,           // in \uXXXX: count = digits left, detail = Surrogate
  kUtf8,          // in a multibyte character: count = continuation bytes left, detail = Utf8Range of the next
  kLowBackslash,  // after a high surrogate escape: the low surrogate's '\' must come
  kLowU,          // then its 'u'
  kLiteral,       // in true/false/null: detail = index in kLiterals, count = bytes matched
  kMinus,         // number states, named after the last byte
  kZero,          // leading 0: no more integer digits
  kInt,
  kDot,
  kFrac,
  kExp,
  kExpSign,
  kExpDigits,
};

// Allowed range of the next UTF-8 continuation byte; the first one after E0, ED, F0 and F4 is narrower,
// which rules out overlongs, surrogates and code points above U+10FFFF (RFC 3629's table).
enum Utf8Range : uint8_t { kAnyContinuation, kA0ToBF, k80To9F, k90ToBF, k80To8F };
constexpr uint8_t kRangeLow[] = {0x80, 0xA0, 0x80, 0x90, 0x80};
constexpr uint8_t kRangeHigh[] = {0xBF, 0xBF, 0x9F, 0xBF, 0x8F};

// What the \u escape being read may still become.
enum Surrogate : uint8_t {
  kPlain,        // nothing special (or not yet known)
  kFirstD,       // first digit D: a high surrogate (D8..DB), a lone low one (DC..DF, refused) or plain
  kHigh,         // D800..DBFF: a low surrogate escape must follow
  kLowRequired,  // the second escape of a pair: must be DC00..DFFF
};

constexpr std::string_view kLiterals[] = {"true", "false", "null"};

bool is_whitespace(uint8_t b) {
  return b == ' ' || b == '\n' || b == '\r' || b == '\t';
}
bool is_digit(uint8_t b) {
  return b >= '0' && b <= '9';
}

bool top_is_object(const JsonValueState& s) {
  return (s.containers >> (s.depth - 1)) & 1;
}

void pop(JsonValueState& s) {
  --s.depth;
  s.containers &= ~(uint64_t{1} << s.depth);
  s.mode = kAfterValue;
}

bool begin_utf8(JsonValueState& s, uint8_t b) {
  uint8_t continuations = 0;
  uint8_t range = kAnyContinuation;
  if (b >= 0xC2 && b <= 0xDF) {
    continuations = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    continuations = 2;
    if (b == 0xE0) range = kA0ToBF;
    if (b == 0xED) range = k80To9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    continuations = 3;
    if (b == 0xF0) range = k90ToBF;
    if (b == 0xF4) range = k80To8F;
  } else {
    return false;  // a stray continuation byte, C0/C1 (always overlong) or F5..FF
  }
  s.mode = kUtf8;
  s.count = continuations;
  s.detail = range;
  return true;
}

bool step_hex(JsonValueState& s, uint8_t b) {
  const int v = hex_value(b);
  if (v < 0) return false;
  if (s.count == 4) {
    if (s.detail == kLowRequired) {
      if (v != 0xD) return false;
    } else {
      s.detail = v == 0xD ? kFirstD : kPlain;
    }
  } else if (s.count == 3) {
    if (s.detail == kLowRequired) {
      if (v < 0xC) return false;
      s.detail = kPlain;
    } else if (s.detail == kFirstD) {
      if (v >= 0xC) return false;  // a low surrogate with no high one before it
      s.detail = v >= 0x8 ? kHigh : kPlain;
    }
  }
  if (--s.count == 0) {
    s.mode = s.detail == kHigh ? kLowBackslash : kString;
    s.detail = 0;
  }
  return true;
}

}  // namespace

size_t JsonValueStateHash::operator()(const JsonValueState& s) const {
  const uint64_t small = uint64_t{s.depth} | uint64_t{s.mode} << 8 | uint64_t{s.count} << 16 |
                         uint64_t{s.detail} << 24 | uint64_t{s.whitespace} << 32 | uint64_t{s.in_key} << 40;
  return static_cast<size_t>(
      mix64(s.containers * 0x9e3779b97f4a7c15ull ^ mix64(small + 0x632be59bd9b4e019ull)));
}

JsonValueAutomaton::JsonValueAutomaton(JsonValueOptions options) : options_(options) {
  TPS_CHECK(options_.max_depth >= 0 && options_.max_depth <= 64, "max_depth ", options_.max_depth);
  TPS_CHECK(options_.max_depth >= 1 || !options_.top_level_object, "a top-level object needs max_depth >= 1");
  TPS_CHECK(options_.max_whitespace_run >= 0 && options_.max_whitespace_run <= 255, "max_whitespace_run ",
            options_.max_whitespace_run);
}

bool JsonValueAutomaton::push(State& s, bool object) const {
  if (s.depth >= options_.max_depth) return false;
  if (object) s.containers |= uint64_t{1} << s.depth;
  ++s.depth;
  s.mode = object ? kObjectFirst : kArrayFirst;
  return true;
}

bool JsonValueAutomaton::begin_value(State& s, uint8_t b) const {
  if (s.depth == 0 && options_.top_level_object && b != '{') return false;
  switch (b) {
    case '{':
      return push(s, true);
    case '[':
      return push(s, false);
    case '"':
      s.mode = kString;
      s.in_key = 0;
      return true;
    case 't':
    case 'f':
    case 'n':
      s.mode = kLiteral;
      s.detail = b == 't' ? 0 : b == 'f' ? 1 : 2;
      s.count = 1;
      return true;
    case '-':
      s.mode = kMinus;
      return true;
    case '0':
      s.mode = kZero;
      return true;
    default:
      if (!is_digit(b)) return false;
      s.mode = kInt;
      return true;
  }
}

// The modes between tokens, where whitespace may come.
bool JsonValueAutomaton::step_structural(State& s, uint8_t b) const {
  if (is_whitespace(b)) {
    if (s.whitespace >= options_.max_whitespace_run) return false;
    if (!options_.trailing_whitespace && s.mode == kAfterValue && s.depth == 0) return false;
    ++s.whitespace;
    return true;
  }
  s.whitespace = 0;
  switch (s.mode) {
    case kValue:
      return begin_value(s, b);
    case kArrayFirst:
      if (b == ']') {
        pop(s);
        return true;
      }
      return begin_value(s, b);
    case kObjectFirst:
      if (b == '}') {
        pop(s);
        return true;
      }
      [[fallthrough]];
    case kKey:
      if (b != '"') return false;
      s.mode = kString;
      s.in_key = 1;
      return true;
    case kColon:
      if (b != ':') return false;
      s.mode = kValue;
      return true;
    case kAfterValue: {
      if (s.depth == 0) return false;
      const bool object = top_is_object(s);
      if (b == ',') {
        s.mode = object ? kKey : kValue;
        return true;
      }
      if (b != (object ? '}' : ']')) return false;
      pop(s);
      return true;
    }
    default:
      return false;
  }
}

bool JsonValueAutomaton::step(State& s, uint8_t b) const {
  // Most bytes of a vocabulary walk are plain characters inside strings: no state change.
  if (s.mode == kString && b >= 0x20 && b < 0x80 && b != '"' && b != '\\') return true;
  State t = s;  // modified freely, committed only on success
  bool ok = false;
  switch (t.mode) {
    case kValue:
    case kArrayFirst:
    case kObjectFirst:
    case kKey:
    case kColon:
    case kAfterValue:
      ok = step_structural(t, b);
      break;
    case kString:
      if (b == '"') {
        t.mode = t.in_key ? kColon : kAfterValue;
        t.in_key = 0;
        ok = true;
      } else if (b == '\\') {
        t.mode = kEscape;
        ok = true;
      } else if (b < 0x80) {
        ok = b >= 0x20;  // control characters must be escaped
      } else {
        ok = begin_utf8(t, b);
      }
      break;
    case kUtf8:
      ok = b >= kRangeLow[t.detail] && b <= kRangeHigh[t.detail];
      t.detail = kAnyContinuation;
      if (--t.count == 0) t.mode = kString;
      break;
    case kEscape:
      if (b == 'u') {
        t.mode = kHex;
        t.count = 4;
        t.detail = kPlain;
        ok = true;
      } else {
        ok = b == '"' || b == '\\' || b == '/' || b == 'b' || b == 'f' || b == 'n' || b == 'r' || b == 't';
        t.mode = kString;
      }
      break;
    case kHex:
      ok = step_hex(t, b);
      break;
    case kLowBackslash:
      ok = b == '\\';
      t.mode = kLowU;
      break;
    case kLowU:
      ok = b == 'u';
      t.mode = kHex;
      t.count = 4;
      t.detail = kLowRequired;
      break;
    case kLiteral: {
      const std::string_view literal = kLiterals[t.detail];
      ok = b == static_cast<uint8_t>(literal[t.count]);
      if (++t.count == literal.size()) {
        t.mode = kAfterValue;
        t.count = 0;
        t.detail = 0;
      }
      break;
    }
    case kMinus:
      ok = is_digit(b);
      t.mode = b == '0' ? kZero : kInt;
      break;
    case kDot:
      ok = is_digit(b);
      t.mode = kFrac;
      break;
    case kExp:
      ok = is_digit(b) || b == '+' || b == '-';
      t.mode = is_digit(b) ? kExpDigits : kExpSign;
      break;
    case kExpSign:
      ok = is_digit(b);
      t.mode = kExpDigits;
      break;
    case kZero:
    case kInt:
    case kFrac:
    case kExpDigits:
      if (is_digit(b) && t.mode != kZero) {
        ok = true;
      } else if (b == '.' && (t.mode == kZero || t.mode == kInt)) {
        t.mode = kDot;
        ok = true;
      } else if ((b == 'e' || b == 'E') && t.mode != kExpDigits) {
        t.mode = kExp;
        ok = true;
      } else {
        // A number has no closing byte: it ends at the first byte that cannot extend it.
        t.mode = kAfterValue;
        ok = step_structural(t, b);
      }
      break;
    default:
      break;
  }
  if (ok) s = t;
  return ok;
}

bool JsonValueAutomaton::accepting(const State& s) const {
  if (s.depth != 0) return false;
  return s.mode == kAfterValue || s.mode == kZero || s.mode == kInt || s.mode == kFrac ||
         s.mode == kExpDigits;
}

bool JsonValueAutomaton::matches(std::string_view text) const {
  State s = start();
  for (const char c : text) {
    if (!step(s, static_cast<uint8_t>(c))) return false;
  }
  return accepting(s);
}

}  // namespace tpserve::serve
