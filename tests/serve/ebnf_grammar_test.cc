// EBNF grammars (runtime/serve/ebnf_grammar.h) and their byte automaton (runtime/serve/ebnf_automaton.h):
// texts in and out of small grammars, agreement with the regex DFA on random texts where a grammar is
// regular, and with a counter where it is not, the compile-time refusals with their line and column, and
// the arena's limit.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/serve/ebnf_automaton.h"
#include "runtime/serve/ebnf_grammar.h"
#include "runtime/serve/regex_dfa.h"

namespace tpserve::serve {
namespace {

EbnfAutomaton automaton(const std::string& grammar) {
  return EbnfAutomaton(parse_ebnf(grammar));
}

struct Language {
  std::string grammar;
  std::vector<std::string> in, out;
};

TEST(EbnfGrammar, TextsInAndOutOfTheLanguage) {
  const std::vector<Language> cases = {
      {R"(root ::= "yes" | "no")", {"yes", "no"}, {"", "ye", "yess", "noyes", "Yes"}},
      {R"(root ::= [a-c]+ [^a-z])", {"a1", "cab-", "abc\xC3\xA9"}, {"abc", "d1", "1", "ab12"}},
      {R"(root ::= [α-ω]{2})", {"αβ", "ωω"}, {"α", "αa", "αβγ", "ab"}},
      {R"(root ::= "<" . ">")", {"<a>", "<\xC3\xA9>", "<\xF0\x9F\x98\x80>"}, {"<>", "<ab>", "<\xC3>"}},
      {R"(root ::= "a"{2,3} "b"{2,} "c"{,2} "d"{1})",
       {"aabbd", "aaabbbbbccd", "aabbcd"},
       {"abbd", "aaaabbd", "aabd", "aabbcccd", "aabb"}},
      {R"g(root ::= "(" root ")" | "x")g", {"x", "(x)", "(((x)))"}, {"", "(x", "x)", "((x)", "()"}},
      {"root ::= \"\\x41\\u00e9\\n\" [\\]\\-]", {"A\xC3\xA9\n]", "A\xC3\xA9\n-"}, {"A\xC3\xA9\n^", "A"}},
      // Rules across lines, comments, names with - and _, a rule used before its definition.
      {"# a list of numbers\nroot ::= \"[\" ws (num (\",\" ws num)*)? ws \"]\"  # the list\n"
       "num ::= \"-\"? digit_1-9 [0-9]* | \"0\"\nws ::= [ \\t\\n]*\ndigit_1-9 ::=\n  [1-9]\n",
       {"[]", "[ 1,2]", "[10, -30,0 ]", "[\n]"},
       {"[01]", "[1,]", "[,1]", "[1 2]", "1"}},
      // Recursion in last place, and a repetition of something that may be empty: both allowed.
      {R"(root ::= "a"? root | "x")", {"x", "ax", "aaax"}, {"a", "xa"}},
      {R"(root ::= ("a"?)* "b")", {"b", "ab", "aaab"}, {"ba", ""}},
      // Ambiguity: the same text by two parses.
      {R"(root ::= "a" "b"* | "a"+ "b"?)", {"a", "ab", "abbb", "aaab"}, {"b", "aaabb"}},
      {"root ::= [^\"\\\\]+", {"ab", "\xC3\xA9"}, {"a\"", "a\\"}},
      // A rule the root never reaches may be anything that parses.
      {"root ::= \"a\"\nunused ::= unused \"b\" | \"c\"", {"a"}, {"c", "cb"}},
  };
  for (const Language& c : cases) {
    EbnfAutomaton a = automaton(c.grammar);
    for (const std::string& text : c.in)
      EXPECT_TRUE(a.matches(text)) << c.grammar << " should match '" << text << "'";
    for (const std::string& text : c.out)
      EXPECT_FALSE(a.matches(text)) << c.grammar << " should not match '" << text << "'";
  }
}

// step() refuses a byte without touching the state, and a state's prefixes always continue.
TEST(EbnfGrammar, RefusedBytesLeaveTheState) {
  EbnfAutomaton a = automaton(R"(root ::= "ab" | "ac")");
  EbnfState s = a.start();
  ASSERT_TRUE(a.step(s, 'a'));
  const EbnfState after_a = s;
  EXPECT_FALSE(a.step(s, 'x'));
  EXPECT_EQ(s, after_a);
  EXPECT_FALSE(a.accepting(s));
  ASSERT_TRUE(a.step(s, 'c'));
  EXPECT_TRUE(a.accepting(s));
  EXPECT_FALSE(a.step(s, 'c'));
}

std::string random_text(std::mt19937& rng, const std::string& alphabet, int max_len) {
  std::string text(std::uniform_int_distribution<int>(0, max_len)(rng), ' ');
  for (char& c : text) c = alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
  return text;
}

// Regular grammars against the same language as a regex, on random texts over their alphabet.
TEST(EbnfGrammar, RegularGrammarsAgreeWithTheRegexDfa) {
  struct Pair {
    std::string grammar, pattern, alphabet;
  };
  const std::vector<Pair> pairs = {
      {R"(root ::= ("a" | "bc")* "d"? [0-9]{1,3})", "(a|bc)*d?[0-9]{1,3}", "abcd019"},
      {R"(root ::= x ("-" x)*
          x ::= [a-b]+ | "c" [0-1]?)",
       "([a-b]+|c[0-1]?)(-([a-b]+|c[0-1]?))*", "abc01-"},
      {R"(root ::= "a"{0,2} ("b" | "ab")+ "a"{2,})", "a{0,2}(b|ab)+a{2,}", "ab"},
  };
  std::mt19937 rng(20261205);
  for (const auto& [grammar, pattern, alphabet] : pairs) {
    EbnfAutomaton a = automaton(grammar);
    RegexDfa dfa(pattern);
    int matched = 0;
    for (int i = 0; i < 3000; ++i) {
      const std::string text = random_text(rng, alphabet, 9);
      const bool expected = dfa.matches(text);
      matched += expected;
      ASSERT_EQ(a.matches(text), expected) << grammar << " on '" << text << "'";
    }
    EXPECT_GT(matched, 20) << grammar;  // the texts reach into the language, not only around it
  }
}

// Balanced brackets of two kinds (not regular) against a stack, on random texts.
TEST(EbnfGrammar, NestedBracketsAgreeWithAStack) {
  EbnfAutomaton a = automaton(R"g(root ::= item+
                                  item ::= "(" item* ")" | "[" item* "]" | "x")g");
  auto balanced = [](const std::string& text) {
    std::string open;
    for (char c : text) {
      if (c == '(' || c == '[') {
        open += c;
      } else if (c == ')' || c == ']') {
        if (open.empty() || open.back() != (c == ')' ? '(' : '[')) return false;
        open.pop_back();
      }
    }
    return open.empty() && !text.empty();
  };
  std::mt19937 rng(7);
  int matched = 0;
  for (int i = 0; i < 5000; ++i) {
    const std::string text = random_text(rng, "()[]x", 10);
    matched += balanced(text);
    ASSERT_EQ(a.matches(text), balanced(text)) << text;
  }
  EXPECT_GT(matched, 50);
}

void expect_refused(const std::string& grammar, const std::string& message, const EbnfLimits& limits = {}) {
  try {
    EbnfAutomaton a(parse_ebnf(grammar, limits));
    ADD_FAILURE() << grammar << ": compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << grammar << ": " << e.what();
  }
}

TEST(EbnfGrammar, RefusalsSayWhereAndWhy) {
  expect_refused("", "no rule");
  expect_refused("# only a comment\n", "no rule");
  expect_refused(R"(start ::= "a")", "no rule is named 'root'");
  expect_refused(R"(root ::= foo)", "line 1, column 10: rule 'foo' is used but never defined");
  expect_refused("root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice");
  expect_refused(R"(root = "a")", "line 1, column 6: expected '::='");
  expect_refused(R"(root ::= "abc)", "line 1, column 10: text opened here is never closed");
  expect_refused(R"(root ::= ("a" | "b")", "line 1, column 10: expected ')'");
  expect_refused(R"(root ::= [z-a])", "class range out of order");
  expect_refused(R"(root ::= [a-)", "never closed");
  expect_refused(R"(root ::= "\q")", "unknown escape '\\q'");
  expect_refused(R"(root ::= "\uD800")", "surrogate");
  expect_refused(R"(root ::= "\x4")", "hex digits");
  expect_refused(R"(root ::= [^\x00-\U0010FFFF])", "matches no character");
  expect_refused(R"(root ::= "a"{3,2})", "m < n");
  expect_refused(R"(root ::= "a"{x})", "expected a count");
  expect_refused(R"(root ::= "a"{99999})", "repetition count above 4096");
  expect_refused(R"(root ::= "a" ;)", "line 1, column 14: unexpected ';'");
  expect_refused("root ::= \"\xC3\"", "not valid UTF-8");
  expect_refused(R"(root ::= "")", "matches only the empty text");
  expect_refused(R"(root ::= "a" root)", "rule 'root' can never end");
  expect_refused("root ::= a | \"b\"\na ::= \"x\" a", "rule 'a' can never end");
  expect_refused(R"(root ::= root "a" | "b")", "rule 'root' is left-recursive");
  expect_refused("root ::= a \"x\"\na ::= b? root \"y\" | \"z\"\nb ::= \"q\"", "left-recursive");
  expect_refused(R"(root ::= ("a"? root)* "b")", "left-recursive");
  expect_refused("root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')'),
                 "nested deeper than 256");
  expect_refused(R"(root ::= "a"))", "expected a rule name, got ')'");
  EbnfLimits small;
  small.max_elements = 100;
  expect_refused(R"(root ::= "a"{200})", "too large", small);
  expect_refused(R"(root ::= "a"{200,})", "too large", small);
  expect_refused(R"(root ::= "a"{20,80})", "too large", small);
  expect_refused(
      "root ::= x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x "
      "x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x "
      "x x x x x x x x x x\nx ::= \"a\"",
      "too large", small);  // references count
  small = {};
  small.max_rules = 3;
  expect_refused(R"(root ::= ("a" | "b") ("c" | "d") ("e" | "f"))", "too many rules", small);
}

// Past its node budget the automaton refuses bytes that need new nodes: deep nesting, here.
TEST(EbnfGrammar, NodeBudgetRefusesDeeperNesting) {
  const EbnfRules rules = parse_ebnf(R"g(root ::= "(" root ")" | "x")g");
  const std::string deep = std::string(30, '(') + "x" + std::string(30, ')');
  EbnfAutomaton roomy(rules);
  EXPECT_TRUE(roomy.matches(deep));
  EbnfAutomaton tight(rules, {.max_nodes = 12});
  EXPECT_FALSE(tight.matches(deep));
  EXPECT_LE(tight.num_nodes(), 12u);
  EXPECT_TRUE(tight.matches("((x))"));  // shallow texts still pass
}

// Ways of reaching one position share one graph node, whatever called them: the textbook expression
// grammar (each level of nesting behind three alternatives of two rules) keeps a few nodes a level, and
// callers of callers of alternatives do not multiply.
TEST(EbnfGrammar, AlternativeCallersShareNodes) {
  EbnfAutomaton expr = automaton(R"g(root ::= expr
      expr ::= term "+" expr | term "-" expr | term
      term ::= factor "*" term | factor "/" term | factor
      factor ::= "(" expr ")" | [0-9])g");
  std::string text = "1";
  for (int i = 0; i < 60; ++i) text = "(" + text + (i % 2 ? "*2" : "+3") + ")";
  EXPECT_TRUE(expr.matches(text));
  EXPECT_TRUE(expr.matches("1+(2*(3-(4/(5+(6)))))"));
  EXPECT_FALSE(expr.matches("1+(2*(3-(4/(5+(6))))"));
  EXPECT_LT(expr.num_nodes(), 60u * 40u) << "nodes should grow linearly with the nesting";
  // 19 rules of two alternatives each calling the next: 2^19 parse paths reach the last, one node each.
  std::string chain = "root ::= r1 \"a\" | r1 \"b\"\n";
  for (int k = 1; k < 19; ++k)
    chain += "r" + std::to_string(k) + " ::= r" + std::to_string(k + 1) + " \"a\" | r" +
             std::to_string(k + 1) + " \"b\"\n";
  chain += "r19 ::= \"z\"";
  EbnfAutomaton a = automaton(chain);
  EXPECT_TRUE(a.matches("z" + std::string(19, 'a')));
  EXPECT_TRUE(a.matches("z" + std::string(19, 'b')));
  EXPECT_TRUE(a.matches("zabababababababababa"));
  EXPECT_FALSE(a.matches("z" + std::string(18, 'a')));
  EXPECT_LT(a.num_nodes(), 200u);
}

// Many alternatives taking the same byte share their successors (kept once, not once each).
TEST(EbnfGrammar, AmbiguousRepetitionsStaySmall) {
  std::string alternatives;
  for (int i = 0; i < 300; ++i) alternatives += std::string(i ? " | " : "") + "\"a\"";
  EbnfAutomaton a = automaton("root ::= (" + alternatives + ")* \"b\"");
  EXPECT_TRUE(a.matches(std::string(50, 'a') + "b"));
  EXPECT_FALSE(a.matches(std::string(50, 'a')));
  EXPECT_LT(a.bytes(), size_t(1) << 20);
}

// An ambiguous grammar whose parent sets grow with the text (the dangling else): within the default budgets
// for a text of a few hundred bytes; with small ones, refused rather than grown without bound.
TEST(EbnfGrammar, EntryBudgetBoundsGrowingAmbiguity) {
  const EbnfRules rules = parse_ebnf(R"g(root ::= stmt
      stmt ::= "i" stmt opt | "x"
      opt ::= "e" stmt | "")g");
  auto text = [](int n) {
    std::string t(n, 'i');
    t += "x";
    for (int k = 0; k < n; ++k) t += "ex";
    return t;
  };
  EbnfAutomaton roomy(rules);
  EXPECT_TRUE(roomy.matches(text(200)));
  EXPECT_FALSE(roomy.matches(text(200) + "e"));
  EbnfAutomaton tight(rules, {.max_entries = 5000});
  EXPECT_FALSE(tight.matches(text(200)));
  EXPECT_TRUE(tight.matches(text(3)));
  EXPECT_LT(tight.bytes(), size_t(1) << 20);
}

// A start with more tops than the budget refuses the grammar; a byte whose successors exceed it is refused.
// (One node a byte position: `(.*){4096}`, 4096 nullable copies of one rule, is a few tops.)
TEST(EbnfGrammar, StateBudgetRefusesRunawayAmbiguity) {
  EXPECT_THROW(EbnfAutomaton(parse_ebnf(R"(root ::= "a" | "b" | "c" | "d" | "e")"), {.max_state_stacks = 4}),
               Error);
  EbnfAutomaton a(parse_ebnf(R"(root ::= "x" ("a" | "b" | "c" | "d" | "e") | "y")"), {.max_state_stacks = 4});
  EXPECT_FALSE(a.matches("xa"));
  EXPECT_TRUE(a.matches("y"));
  // One way on over the budget refuses the byte, though another way would take it.
  EbnfAutomaton b(parse_ebnf(R"(root ::= "x" ("a" | "b" | "c" | "d" | "e") | "x" "y")"),
                  {.max_state_stacks = 4});
  EXPECT_FALSE(b.matches("xy"));
  // Calls nested before any text past the closure's depth: refused by name.
  std::string chain;
  for (int k = 0; k < 5000; ++k)
    chain += "r" + std::to_string(k) + " ::= r" + std::to_string(k + 1) + " \"a\"\n";
  expect_refused("root ::= r0\n" + chain + "r5000 ::= \"b\"", "nests calls more than 4096 deep");
  EbnfAutomaton any = automaton(R"(root ::= (.*){4096})");
  EXPECT_TRUE(any.matches("hello, world"));
  EXPECT_LE(any.start().stacks.size(), 16u);
}

}  // namespace
}  // namespace tpserve::serve
