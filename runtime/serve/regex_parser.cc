#include "runtime/serve/regex_parser.h"

#include <algorithm>
#include <optional>
#include <tuple>

#include "common/error.h"
#include "runtime/serve/utf8.h"

namespace tpserve::serve {
namespace {

constexpr int kMaxNesting = 200;       // groups inside groups (the parser and compiler recurse on them)
constexpr int kMaxCount = 1000000000;  // counts are capped here while parsing; the compiler bounds size

using Set = std::vector<CodePointRange>;

RegexNode set_node(Set set) {
  RegexNode node;
  node.kind = RegexNode::Kind::kSet;
  node.set = merged_code_point_ranges(std::move(set));
  return node;
}

// Joins parts into a concatenation or an alternation (one part stands alone, none is the empty string).
RegexNode joined(RegexNode::Kind kind, std::vector<RegexNode> parts) {
  if (parts.size() == 1) return std::move(parts[0]);
  RegexNode node;
  if (!parts.empty()) node.kind = kind;
  node.children = std::move(parts);
  return node;
}

bool is_ascii_alnum(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

class Parser {
 public:
  explicit Parser(std::string_view pattern) {
    if (!decode_utf8(pattern, s_)) throw Error("regex: the pattern is not valid UTF-8");
  }

  RegexNode parse() {
    RegexNode root = alternation();
    if (!at_end()) fail("unbalanced parenthesis ')'", pos_);  // alternation() stops only at ')'
    return root;
  }

 private:
  std::vector<char32_t> s_;
  size_t pos_ = 0;
  int depth_ = 0;

  bool at_end() const { return pos_ >= s_.size(); }
  char32_t peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : 0; }
  bool peek_is(char32_t c, size_t ahead = 0) const {
    return pos_ + ahead < s_.size() && s_[pos_ + ahead] == c;
  }

  std::string text(size_t from, size_t to) const {
    std::string out;
    for (size_t i = from; i < std::min(to, s_.size()); ++i) append_utf8(out, s_[i]);
    return out;
  }

  [[noreturn]] void fail(const std::string& what, size_t at) const {
    throw Error("regex: " + what + " at offset " + std::to_string(at));
  }
  [[noreturn]] void unsupported(size_t from, size_t to, const std::string& why) const {
    fail("unsupported construct '" + text(from, to) + "' (" + why + ")", from);
  }

  RegexNode alternation() {
    std::vector<RegexNode> alternatives;
    alternatives.push_back(concatenation());
    while (peek_is('|')) {
      ++pos_;
      alternatives.push_back(concatenation());
    }
    return joined(RegexNode::Kind::kAlternate, std::move(alternatives));
  }

  RegexNode concatenation() {
    std::vector<RegexNode> items;
    const size_t begin = pos_;
    while (!at_end() && peek() != '|' && peek() != ')') {
      const char32_t c = peek();
      if (c == '^') {
        // Whole-text matching: '^' at the start of a top-level alternative adds nothing.
        if (depth_ != 0 || pos_ != begin) unsupported(pos_, pos_ + 1, "anchor inside the pattern");
        ++pos_;
        continue;
      }
      if (c == '$') {
        if (depth_ != 0 || !(pos_ + 1 == s_.size() || peek_is('|', 1))) {
          unsupported(pos_, pos_ + 1, "anchor inside the pattern");
        }
        ++pos_;
        continue;
      }
      RegexNode atom = this->atom();
      if (quantifier(atom)) {
        const size_t at = pos_;
        RegexNode ignored;
        if (quantifier(ignored)) fail("multiple repeat '" + text(at, pos_) + "'", at);
      }
      items.push_back(std::move(atom));
    }
    return joined(RegexNode::Kind::kConcat, std::move(items));
  }

  // Parses {n}, {n,}, {,m} or {n,m} at pos_ without consuming it; nullopt when it is a literal '{'.
  std::optional<std::pair<int, int>> braces(size_t& end) const {
    size_t i = pos_ + 1;
    auto number = [&](int& value) {
      const size_t from = i;
      value = 0;
      while (i < s_.size() && s_[i] >= '0' && s_[i] <= '9') {
        value = static_cast<int>(std::min<long long>(kMaxCount, value * 10LL + (s_[i] - '0')));
        ++i;
      }
      return i > from;
    };
    int lo = 0, hi = 0;
    const bool has_lo = number(lo);
    if (i < s_.size() && s_[i] == '}') {
      if (!has_lo) return std::nullopt;
      end = i + 1;
      return std::pair{lo, lo};
    }
    if (i >= s_.size() || s_[i] != ',') return std::nullopt;
    ++i;
    const bool has_hi = number(hi);
    if (i >= s_.size() || s_[i] != '}') return std::nullopt;
    end = i + 1;
    return std::pair{lo, has_hi ? hi : -1};
  }

  bool starts_quantifier() const {
    const char32_t c = peek();
    size_t end = 0;
    return !at_end() && (c == '*' || c == '+' || c == '?' || (c == '{' && braces(end)));
  }

  // Applies a quantifier at pos_ to atom; false when none is there.
  bool quantifier(RegexNode& atom) {
    if (!starts_quantifier()) return false;
    const size_t at = pos_;
    int lo = 0, hi = -1;
    switch (peek()) {
      case '*':
        ++pos_;
        break;
      case '+':
        lo = 1, ++pos_;
        break;
      case '?':
        hi = 1, ++pos_;
        break;
      default: {
        size_t end = 0;
        std::tie(lo, hi) = *braces(end);
        pos_ = end;
        if (hi != -1 && hi < lo) fail("bad repetition '" + text(at, pos_) + "' (min > max)", at);
      }
    }
    if (peek_is('?')) {
      ++pos_;  // lazy: the same language
    } else if (peek_is('+')) {
      unsupported(at, pos_ + 1, "possessive quantifier");
    }
    RegexNode repeat;
    repeat.kind = RegexNode::Kind::kRepeat;
    repeat.min = lo;
    repeat.max = hi;
    repeat.offset = at;
    repeat.quantifier = text(at, pos_);
    repeat.children.push_back(std::move(atom));
    atom = std::move(repeat);
    return true;
  }

  RegexNode atom() {
    const size_t at = pos_;
    if (starts_quantifier()) {
      size_t end = pos_ + 1;
      if (peek() == '{') braces(end);
      fail("nothing to repeat before '" + text(at, end) + "'", at);
    }
    const char32_t c = s_[pos_++];
    switch (c) {
      case '(':
        return group(at);
      case '[':
        return bracket_class(at);
      case '.':
        return set_node(complement_code_point_ranges({{'\n', '\n'}}));
      case '\\': {
        Set set;
        escape(at, /*in_class=*/false, set);
        return set_node(std::move(set));
      }
      default:
        return set_node({{c, c}});
    }
  }

  RegexNode group(size_t open) {
    if (peek_is('?')) {
      const char32_t kind = peek(1);
      if (kind == ':') {
        pos_ += 2;
      } else if (kind == 'P' && peek_is('<', 2)) {
        pos_ += 3;
        group_name(open);
      } else if (kind == '<' && !peek_is('=', 2) && !peek_is('!', 2)) {
        pos_ += 2;
        group_name(open);
      } else if (kind == '=' || kind == '!') {
        unsupported(open, open + 3, "lookahead");
      } else if (kind == '<') {
        unsupported(open, open + 4, "lookbehind");
      } else if (kind == 'P' && peek_is('=', 2)) {
        unsupported(open, open + 4, "backreference");
      } else if ((kind >= 'a' && kind <= 'z') || kind == '-') {
        unsupported(open, open + 3, "inline flags");
      } else if (kind == '>') {
        unsupported(open, open + 3, "atomic group");
      } else {
        unsupported(open, open + 3, "group extension");
      }
    }
    if (++depth_ > kMaxNesting) fail("groups nested deeper than " + std::to_string(kMaxNesting), open);
    RegexNode inside = alternation();
    --depth_;
    if (!peek_is(')')) fail("missing ')' for the '('", open);
    ++pos_;
    return inside;
  }

  void group_name(size_t open) {
    const size_t from = pos_;
    while (!at_end() && peek() != '>' && (is_ascii_alnum(peek()) || peek() == '_' || peek() > 0x7F)) ++pos_;
    if (pos_ == from || !peek_is('>')) fail("bad group name in '" + text(open, pos_ + 1) + "'", open);
    ++pos_;
  }

  RegexNode bracket_class(size_t open) {
    const bool negated = peek_is('^');
    if (negated) ++pos_;
    Set set;
    bool first = true;
    while (true) {
      if (at_end()) fail("unterminated character class '['", open);
      if (peek() == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      const size_t item = pos_;
      Set lo_set;
      const std::optional<char32_t> lo = class_atom(lo_set);
      if (peek_is('-') && pos_ + 1 < s_.size() && s_[pos_ + 1] != ']') {
        ++pos_;
        Set hi_set;
        const std::optional<char32_t> hi = class_atom(hi_set);
        if (!lo || !hi || *hi < *lo) fail("bad character range '" + text(item, pos_) + "'", item);
        set.push_back({*lo, *hi});
      } else {
        set.insert(set.end(), lo_set.begin(), lo_set.end());
      }
    }
    return set_node(negated ? complement_code_point_ranges(set) : std::move(set));
  }

  // One member of a bracket class: returns the code point (also put in set), or nullopt for \d-like sets.
  std::optional<char32_t> class_atom(Set& set) {
    const size_t at = pos_;
    const char32_t c = s_[pos_++];
    if (c != '\\') {
      set.push_back({c, c});
      return c;
    }
    return escape(at, /*in_class=*/true, set);
  }

  // An escape after the '\' at `at` (pos_ is past the '\'): adds what it matches to set; returns the code
  // point when it is a single one.
  std::optional<char32_t> escape(size_t at, bool in_class, Set& set) {
    if (at_end()) fail("incomplete escape '\\'", at);
    const char32_t c = s_[pos_++];
    auto single = [&](char32_t cp) -> std::optional<char32_t> {
      set.push_back({cp, cp});
      return cp;
    };
    const Set digit = {{'0', '9'}};
    const Set word = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
    const Set space = {{'\t', '\r'}, {' ', ' '}};
    switch (c) {
      case 'd':
        set.insert(set.end(), digit.begin(), digit.end());
        return std::nullopt;
      case 'w':
        set.insert(set.end(), word.begin(), word.end());
        return std::nullopt;
      case 's':
        set.insert(set.end(), space.begin(), space.end());
        return std::nullopt;
      case 'D':
        for (CodePointRange r : complement_code_point_ranges(digit)) set.push_back(r);
        return std::nullopt;
      case 'W':
        for (CodePointRange r : complement_code_point_ranges(word)) set.push_back(r);
        return std::nullopt;
      case 'S':
        for (CodePointRange r : complement_code_point_ranges(space)) set.push_back(r);
        return std::nullopt;
      case 'n':
        return single('\n');
      case 'r':
        return single('\r');
      case 't':
        return single('\t');
      case 'f':
        return single('\f');
      case 'v':
        return single('\v');
      case 'a':
        return single('\a');
      case 'x':
        return single(hex_escape(at, 2));
      case 'u':
        return single(unicode_escape(at));
      case 'U':
        return single(hex_escape(at, 8));
      case '0': {
        char32_t value = 0;  // \0 and up to two more octal digits, as Python reads them
        for (int i = 0; i < 2 && !at_end() && peek() >= '0' && peek() <= '7'; ++i)
          value = value * 8 + (s_[pos_++] - '0');
        return single(value);
      }
      case 'b':
        if (in_class) return single('\b');
        unsupported(at, pos_, "word boundary");
      case 'B':
        unsupported(at, pos_, "word boundary");
      case 'A':
      case 'Z':
      case 'z':
      case 'G':
        unsupported(at, pos_, "anchor");
      case 'k':
        unsupported(at, pos_, "backreference");
      case 'p':
      case 'P':
        unsupported(at, pos_, "Unicode property");
      default:
        break;
    }
    if (c >= '1' && c <= '9') unsupported(at, pos_, "backreference");
    if (is_ascii_alnum(c)) fail("bad escape '" + text(at, pos_) + "'", at);
    return single(c);  // an escaped punctuation or non-ASCII character stands for itself
  }

  char32_t hex_escape(size_t at, int digits) {
    char32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const int d = at_end() ? -1 : hex_value(peek());
      if (d < 0)
        fail("incomplete escape '" + text(at, pos_ + 1) + "' (" + std::to_string(digits) +
                 " hex digits expected)",
             at);
      value = value * 16 + static_cast<char32_t>(d);
      ++pos_;
    }
    if (value > kMaxCodePoint) fail("escape '" + text(at, pos_) + "' is beyond U+10FFFF", at);
    return value;
  }

  // \uHHHH; a high surrogate followed by \u and a low surrogate is one code point (as in JSON).
  char32_t unicode_escape(size_t at) {
    const char32_t value = hex_escape(at, 4);
    if (value >= 0xD800 && value <= 0xDBFF && peek_is('\\') && peek_is('u', 1)) {
      const size_t saved = pos_;
      pos_ += 2;
      const char32_t low = hex_escape(saved, 4);
      if (low >= 0xDC00 && low <= 0xDFFF) return 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00);
      pos_ = saved;
    }
    if (value >= 0xD800 && value <= 0xDFFF) fail("escape '" + text(at, pos_) + "' is a lone surrogate", at);
    return value;
  }
};

}  // namespace

RegexNode parse_regex(std::string_view pattern) {
  return Parser(pattern).parse();
}

}  // namespace tpserve::serve
