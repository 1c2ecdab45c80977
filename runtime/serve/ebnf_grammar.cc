#include "runtime/serve/ebnf_grammar.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "common/error.h"
#include "runtime/serve/utf8.h"
#include "runtime/serve/utf8_ranges.h"

namespace tpserve::serve {
namespace {

constexpr int kMaxGroupDepth = 256;
using CodePointRanges = std::vector<CodePointRange>;

bool is_name_char(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class Parser {
 public:
  Parser(std::string_view text, const EbnfLimits& limits) : limits_(limits) {
    if (!decode_utf8(text, text_)) throw Error("grammar: the text is not valid UTF-8");
  }

  EbnfRules parse() {
    skip_space();
    if (at_end()) throw Error("grammar: the text holds no rule");
    while (!at_end()) {
      definition();
      skip_space();
    }
    for (size_t r = 0; r < defined_.size(); ++r)
      if (!defined_[r]) fail("rule '" + out_.rules[r].name + "' is used but never defined", first_use_[r]);
    const auto root = named_.find("root");
    if (root == named_.end()) throw Error("grammar: no rule is named 'root' (the text starts there)");
    out_.root = root->second;
    return std::move(out_);
  }

 private:
  bool at_end() const { return pos_ >= text_.size(); }
  char32_t peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : 0; }

  [[noreturn]] void fail(const std::string& what, size_t at) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n')
        ++line, column = 1;
      else
        ++column;
    }
    throw Error("grammar: line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + what);
  }

  // Whitespace and comments (# to the end of the line).
  void skip_space() {
    while (!at_end()) {
      const char32_t c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        return;
      }
    }
  }

  std::string identifier() {
    std::string name;
    while (!at_end() && is_name_char(peek())) name += static_cast<char>(text_[pos_++]);
    return name;
  }

  bool consume(std::string_view token) {
    for (size_t i = 0; i < token.size(); ++i)
      if (peek(i) != static_cast<char32_t>(token[i])) return false;
    pos_ += token.size();
    return true;
  }

  // A rule name followed by ::= starts here (the previous rule's body ends).
  bool at_definition() {
    const size_t saved = pos_;
    bool yes = false;
    if (is_name_char(peek())) {
      identifier();
      skip_space();
      yes = consume("::=");
    }
    pos_ = saved;
    return yes;
  }

  // n more elements in the rules: refused past the limit before they are made (x{4096} in a long text).
  void count(size_t n, size_t at) {
    elements_ += n;
    if (elements_ > limits_.max_elements)
      fail("the grammar is too large: more than " + std::to_string(limits_.max_elements) +
               " elements once its repetitions are expanded",
           at);
  }

  uint32_t add_rule(std::string name, bool defined, size_t at) {
    if (out_.rules.size() >= limits_.max_rules)
      fail("too many rules (at most " + std::to_string(limits_.max_rules) +
               ", groups and repetitions included)",
           at);
    out_.rules.push_back({std::move(name), {}});
    defined_.push_back(defined);
    first_use_.push_back(at);
    return static_cast<uint32_t>(out_.rules.size() - 1);
  }

  uint32_t named_rule(const std::string& name, size_t at) {
    const auto it = named_.find(name);
    if (it != named_.end()) return it->second;
    const uint32_t id = add_rule(name, false, at);
    named_.emplace(name, id);
    return id;
  }

  // A rule of its own for what a group, class or repetition of the current definition matches.
  EbnfElement anonymous(std::vector<EbnfSequence> alternatives, const char* what, size_t at) {
    EbnfElement e;
    e.rule = add_rule(current_ + " (" + what + ")", true, at);
    out_.rules[e.rule].alternatives = std::move(alternatives);
    return e;
  }

  void definition() {
    const size_t at = pos_;
    if (!is_name_char(peek())) {
      std::string shown;
      append_utf8(shown, peek());
      fail("expected a rule name, got '" + shown + "'", at);
    }
    std::string name = identifier();
    skip_space();
    if (!consume("::=")) fail("expected '::=' after the rule name '" + name + "'", pos_);
    const uint32_t id = named_rule(name, at);
    if (defined_[id]) fail("rule '" + name + "' is defined twice", at);
    defined_[id] = true;
    current_ = name;
    std::vector<EbnfSequence> alternatives = parse_alternatives();
    out_.rules[id].alternatives = std::move(alternatives);
  }

  // Each alternative counts as an element too: the automaton keeps a slot for its end.
  std::vector<EbnfSequence> parse_alternatives() {
    std::vector<EbnfSequence> alternatives;
    count(1, pos_);
    alternatives.push_back(sequence());
    while (true) {
      skip_space();
      if (peek() != '|' || at_end()) return alternatives;
      ++pos_;
      count(1, pos_);
      alternatives.push_back(sequence());
    }
  }

  EbnfSequence sequence() {
    EbnfSequence seq;
    while (true) {
      skip_space();
      if (at_end() || peek() == '|' || peek() == ')' || at_definition()) return seq;
      item(seq);
    }
  }

  // A primary and its postfix operators, appended to seq.
  void item(EbnfSequence& seq) {
    const size_t at = pos_;
    EbnfSequence x = primary();
    while (true) {
      skip_space();
      const char32_t c = peek();
      if (at_end() || (c != '*' && c != '+' && c != '?' && c != '{')) break;
      const EbnfElement one = single(std::move(x), at);
      if (c == '{') {
        x = repetition(one, at);
        continue;
      }
      ++pos_;
      if (c == '*')
        x = {star(one, at)};
      else if (c == '+')
        x = {one, star(one, at)};
      else
        x = {optional(one, at)};
    }
    seq.insert(seq.end(), x.begin(), x.end());
  }

  EbnfSequence primary() {
    const size_t at = pos_;
    const char32_t c = peek();
    if (c == '"' || c == '\'') return literal();
    if (c == '[') return {class_element(char_class(), at)};
    if (c == '.') {
      ++pos_;
      return {class_element({{0, kMaxCodePoint}}, at)};
    }
    if (c == '(') {
      ++pos_;
      if (++group_depth_ > kMaxGroupDepth)
        fail("groups nested deeper than " + std::to_string(kMaxGroupDepth) + " levels", at);
      std::vector<EbnfSequence> alternatives = parse_alternatives();
      --group_depth_;
      skip_space();
      if (peek() != ')' || at_end()) fail("expected ')' to close the group opened here", at);
      ++pos_;
      if (alternatives.size() == 1) return std::move(alternatives[0]);
      return {anonymous(std::move(alternatives), "group", at)};
    }
    if (is_name_char(c)) {
      count(1, at);
      EbnfElement e;
      e.rule = named_rule(identifier(), at);
      return {e};
    }
    std::string shown;
    append_utf8(shown, c);
    fail("unexpected '" + shown + "'", at);
  }

  // One element for x: itself, or a rule holding a sequence of several (or none).
  EbnfElement single(EbnfSequence x, size_t at) {
    if (x.size() == 1) return x[0];
    return anonymous({std::move(x)}, "group", at);
  }

  EbnfElement star(const EbnfElement& x, size_t at) {
    count(2, at);
    EbnfElement r = anonymous({}, "repetition", at);
    out_.rules[r.rule].alternatives = {{x, r}, {}};  // right recursion: the parser's stack does not grow
    return r;
  }

  EbnfElement optional(const EbnfElement& x, size_t at) {
    count(1, at);
    return anonymous({{x}, {}}, "optional", at);
  }

  int number() {
    int n = 0;
    const size_t at = pos_;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      n = n * 10 + static_cast<int>(text_[pos_++] - '0');
      if (n > limits_.max_repetition)
        fail("repetition count above " + std::to_string(limits_.max_repetition), at);
    }
    return n;
  }

  // x{n}, x{n,}, x{n,m}, x{,m}: n copies of x, then x* or m - n nested optional copies.
  EbnfSequence repetition(const EbnfElement& x, size_t at) {
    ++pos_;  // {
    skip_space();
    const bool has_min = peek() >= '0' && peek() <= '9';
    const int min = number();
    skip_space();
    int max = min;
    bool unbounded = false;
    if (peek() == ',') {
      ++pos_;
      skip_space();
      const bool has_max = peek() >= '0' && peek() <= '9';
      max = number();
      unbounded = !has_max;
      skip_space();
    } else if (!has_min) {
      fail("expected a count in '{...}'", pos_);
    }
    if (peek() != '}' || at_end()) fail("expected '}' to close the repetition", pos_);
    ++pos_;
    if (!unbounded && max < min) fail("repetition {n,m} with m < n", at);
    count(static_cast<size_t>(min) + (unbounded ? 0 : 2 * static_cast<size_t>(max - min)), at);
    EbnfSequence out(static_cast<size_t>(min), x);
    if (unbounded) {
      out.push_back(star(x, at));
    } else if (max > min) {
      EbnfElement tail = optional(x, at);  // the innermost: x?
      for (int k = min + 1; k < max; ++k) tail = anonymous({{x, tail}, {}}, "repetition", at);
      out.push_back(tail);
    }
    return out;
  }

  EbnfSequence literal() {
    const size_t at = pos_;
    const char32_t quote = text_[pos_++];
    std::string bytes;
    while (true) {
      if (at_end()) fail("text opened here is never closed", at);
      if (peek() == quote) break;
      append_utf8(bytes, peek() == '\\' ? escape() : text_[pos_++]);
    }
    ++pos_;
    count(bytes.size(), at);
    EbnfSequence seq;
    for (char b : bytes) {
      EbnfElement e;
      e.lo = e.hi = static_cast<uint8_t>(b);
      seq.push_back(e);
    }
    return seq;
  }

  int hex_digits(int count) {
    int value = 0;
    for (int i = 0; i < count; ++i) {
      const int digit = hex_value(peek());  // peek() is 0 at the end: no digit
      if (digit < 0) fail("expected " + std::to_string(count) + " hex digits", pos_);
      value = value * 16 + digit;
      ++pos_;
    }
    return value;
  }

  char32_t escape() {
    const size_t at = pos_;
    ++pos_;  // backslash
    if (at_end()) fail("a backslash ends the text", at);
    const char32_t c = text_[pos_++];
    switch (c) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case '\\':
      case '"':
      case '\'':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/':
        return c;
      case 'x':
      case 'u':
      case 'U': {
        const char32_t cp = static_cast<char32_t>(hex_digits(c == 'x' ? 2 : c == 'u' ? 4 : 8));
        if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF))
          fail("escape of a surrogate or past U+10FFFF", at);
        return cp;
      }
      default: {
        std::string shown;
        append_utf8(shown, c);
        fail("unknown escape '\\" + shown + "'", at);
      }
    }
  }

  // [...] or [^...]: its code point ranges, merged (the complement's for [^...]).
  CodePointRanges char_class() {
    const size_t at = pos_;
    ++pos_;  // [
    const bool negate = peek() == '^' && !at_end();
    if (negate) ++pos_;
    CodePointRanges ranges;
    while (true) {
      if (at_end()) fail("class opened here is never closed", at);
      if (peek() == ']') break;
      const size_t item = pos_;
      const char32_t lo = class_char();
      char32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        hi = class_char();
        if (hi < lo) fail("class range out of order", item);
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    return negate ? complement_code_point_ranges(ranges) : merged_code_point_ranges(std::move(ranges));
  }

  char32_t class_char() { return peek() == '\\' ? escape() : text_[pos_++]; }

  // The byte sequences that encode the ranges' code points: one element, or a rule of alternatives.
  EbnfElement class_element(const CodePointRanges& ranges, size_t at) {
    std::vector<EbnfSequence> alternatives;
    for (const auto& [lo, hi] : ranges)
      for (const Utf8Sequence& bytes : utf8_sequences(lo, hi)) {
        EbnfSequence seq;
        for (const ByteRange& b : bytes) {
          EbnfElement e;
          e.lo = b.lo, e.hi = b.hi;
          seq.push_back(e);
        }
        count(seq.size(), at);
        alternatives.push_back(std::move(seq));
      }
    if (alternatives.empty()) fail("the class matches no character", at);
    if (alternatives.size() == 1 && alternatives[0].size() == 1) return alternatives[0][0];
    return anonymous(std::move(alternatives), "class", at);
  }

  EbnfLimits limits_;
  std::vector<char32_t> text_;
  size_t pos_ = 0;
  EbnfRules out_;
  std::unordered_map<std::string, uint32_t> named_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;  // where each rule was first named (for "never defined")
  std::string current_;            // the rule being defined
  size_t elements_ = 0;            // made so far
  int group_depth_ = 0;            // open ( ... ): the parser recurses once a level
};

}  // namespace

EbnfRules parse_ebnf(std::string_view text, const EbnfLimits& limits) {
  EbnfRules rules = Parser(text, limits).parse();
  check_ebnf_rules(rules);
  return rules;
}

}  // namespace tpserve::serve
