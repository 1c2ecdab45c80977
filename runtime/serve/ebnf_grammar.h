// EBNF grammars for structured output (vLLM's `guided_grammar` / `structured_outputs.grammar`), in the
// GBNF notation that llama.cpp and XGrammar read:
//
//   root   ::= answer ws "."          # a rule per definition; `root` is where the text starts
//   answer ::= "yes" | "no" | [0-9]+  # "..." text, [...] a class of code points ([^...] its complement)
//   ws     ::= [ \t\n]*               # x* x+ x? x{n} x{n,} x{n,m} x{,m}, ( ... ) groups, . any character
//
// A rule's body runs until the next `name ::=`; names are letters, digits, '-' and '_'; `#` starts a
// comment outside text and classes. Escapes in text and classes: \n \r \t \\ \" \' \[ \] \- \^ \/ \xHH
// \uHHHH \UHHHHHHHH. The grammar compiles to byte-level rules: text to its UTF-8 bytes, a class to the
// byte sequences of its code points' encodings (runtime/serve/utf8_ranges.h), groups and repetitions to
// rules of their own. Refused at compile time, with the line and column: syntax errors, undefined or
// redefined rules, no `root`, a rule that can never end (no alternative matches a finite text), left
// recursion that would grow the parser's stack without consuming text (`a ::= a "x"`), and grammars larger
// than the limits below.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tpserve::serve {

// One element of an alternative: a byte in [lo, hi], or a reference to a rule.
struct EbnfElement {
  static constexpr uint32_t kBytes = UINT32_MAX;
  uint32_t rule = kBytes;
  uint8_t lo = 0, hi = 0;
  bool is_rule() const { return rule != kBytes; }
};

using EbnfSequence = std::vector<EbnfElement>;

struct EbnfRule {
  std::string name;                        // anonymous rules: the defining rule's name and what they are
  std::vector<EbnfSequence> alternatives;  // an empty alternative matches the empty text
};

struct EbnfRules {
  std::vector<EbnfRule> rules;
  uint32_t root = 0;
};

struct EbnfLimits {
  size_t max_rules = 16384;       // named and anonymous
  size_t max_elements = 1 << 18;  // over all alternatives
  int max_repetition = 4096;      // n and m of x{n,m}
};

// Throws tpserve::Error ("grammar: line L, column C: ...") when the text is not a grammar the automaton can
// run; the rules have passed check_ebnf_rules.
EbnfRules parse_ebnf(std::string_view text, const EbnfLimits& limits = {});

// Throws tpserve::Error naming the rule where a rule reachable from the root can never end (each of its
// alternatives needs a rule that never ends, itself included), or where a rule can reach itself before any
// byte through a call that is not its alternative's last element (left recursion: the parser's stack would
// grow without bound). A rule that reaches itself only in last place (`a ::= b? a | "x"`) is allowed.
void check_ebnf_rules(const EbnfRules& rules);

}  // namespace tpserve::serve
