// Structured output's grammars over a vocabulary: the vocabulary trie's masks against a token-by-token
// check (regex, JSON and EBNF automata), a request's constraint through a rule (complete, finished,
// refusals, the reasoning gate), the grammar cache, the refusals made at compile time, and regex_literal.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/model/step_batch.h"
#include "runtime/serve/ebnf_automaton.h"
#include "runtime/serve/json_schema_regex.h"
#include "runtime/serve/json_value_automaton.h"
#include "runtime/serve/json_value_regex.h"
#include "runtime/serve/regex_dfa.h"
#include "runtime/serve/structured_grammars.h"
#include "runtime/serve/structured_output_fields.h"
#include "tests/serve/qwen3_tokenizer.h"

namespace tpserve::serve {
namespace {

// A vocabulary with shared prefixes, duplicates, partial UTF-8 and a special token (empty bytes).
std::vector<std::string> small_vocabulary() {
  return {"a",        "b", "ab", "abc", "{",   "}", "\"", "1",  "12", "123",  " ",  "",  "\xC3", "\xA9",
          "\xC3\xA9", "x", "ab", "{\"", "\":", "-", "0",  ".5", "e",  "true", "\n", "9", "a1",   "\"}"};
}

std::vector<int32_t> bits_of(const std::vector<uint32_t>& words) {
  std::vector<int32_t> ids;
  for (size_t t = 0; t < words.size() * 32; ++t)
    if ((words[t / 32] >> (t % 32)) & 1u) ids.push_back(static_cast<int32_t>(t));
  return ids;
}

// The tokens whose every byte the automaton takes from `from`, one token at a time.
template <class Automaton>
std::vector<int32_t> brute_force(Automaton& a, typename Automaton::State from,
                                 const std::vector<std::string>& vocabulary) {
  std::vector<int32_t> ids;
  for (size_t t = 0; t < vocabulary.size(); ++t) {
    if (vocabulary[t].empty()) continue;
    auto s = from;
    bool ok = true;
    for (char c : vocabulary[t]) ok = ok && a.step(s, static_cast<uint8_t>(c));
    if (ok) ids.push_back(static_cast<int32_t>(t));
  }
  return ids;
}

struct DfaSteps {  // RegexDfa under TokenTrie's interface
  using State = int32_t;
  RegexDfa& dfa;
  bool step(State& s, uint8_t b) {
    const State n = dfa.next(s, b);
    if (n == RegexDfa::kDead) return false;
    s = n;
    return true;
  }
};

TEST(TokenTrie, MasksAreTheTokensTheAutomatonTakesWhole) {
  const std::vector<std::string> vocabulary = small_vocabulary();
  const TokenTrie trie(vocabulary);
  EXPECT_EQ(trie.num_tokens(), vocabulary.size() - 1);  // the special token left out
  RegexDfa dfa("(ab|a1)c?[0-9]*|\\{\"[a-z]+\":(true|-?[0-9]+(\\.[0-9]+)?)\"?\\}|é+");
  DfaSteps steps{dfa};
  // From the start and from states along a few texts.
  for (const std::string text : {"", "a", "ab", "{\"", "{\"ab\":", "{\"ab\":-1", "\xC3"}) {
    int32_t s = dfa.start();
    for (char c : text) ASSERT_TRUE(steps.step(s, static_cast<uint8_t>(c))) << text;
    std::vector<uint32_t> words(2, 0u);
    trie.allowed_tokens(steps, s, words.data(), 2);
    EXPECT_EQ(bits_of(words), brute_force(steps, s, vocabulary)) << "after '" << text << "'";
  }
  // Ids past the words given are left out.
  std::vector<uint32_t> one(1, 0u);
  trie.allowed_tokens(steps, dfa.start(), one.data(), 1);
  EXPECT_EQ(bits_of(one), brute_force(steps, dfa.start(), vocabulary));
}

TEST(TokenTrie, JsonMasksOverTheQwen3VocabularyMatchATokenByTokenCheck) {
  QWEN3_TOKENIZER_OR_SKIP(tok);
  std::vector<std::string> vocabulary(tok->vocab_size());
  for (int32_t id = 0; id < tok->vocab_size(); ++id)
    if (!tok->is_special(id)) vocabulary[id] = tok->token_bytes(id);
  const TokenTrie trie(vocabulary);
  JsonValueAutomaton json;
  struct Steps {
    using State = JsonValueState;
    JsonValueAutomaton& a;
    bool step(State& s, uint8_t b) { return a.step(s, b); }
  } steps{json};
  for (const std::string text :
       {"", "{", "{\"na", "{\"name\": ", "{\"name\": \"Ol\\u00", "{\"a\": [1, 2.5e", "{\"a\": {\"b\": [tr"}) {
    JsonValueState s = json.start();
    for (char c : text) ASSERT_TRUE(json.step(s, static_cast<uint8_t>(c))) << text;
    std::vector<uint32_t> words(mask_words(tok->vocab_size()), 0u);
    trie.allowed_tokens(steps, s, words.data(), static_cast<int>(words.size()));
    const std::vector<int32_t> got = bits_of(words), want = brute_force(steps, s, vocabulary);
    EXPECT_EQ(got, want) << "after '" << text << "'";
    EXPECT_FALSE(got.empty());
  }
}

// An EBNF grammar's masks (its stack sets as trie states) against the token-by-token check, over the small
// vocabulary and over Qwen3's, from states along a few texts.
TEST(TokenTrie, EbnfMasksMatchATokenByTokenCheck) {
  const std::string grammar = R"(root ::= obj
      obj ::= "{" ws (pair ("," ws pair)*)? ws "}"
      pair ::= "\"" [a-z]+ "\"" ws ":" ws val
      val ::= obj | [0-9]+ ("." [0-9]+)? | "true" | "\"" [^"\\]* "\""
      ws ::= [ \n]*)";
  const std::vector<std::string> texts = {
      "", "{", "{\"a", "{\"ab\": ", "{\"ab\": 1", "{\"a\":{\"b\":\"x\xC3", "{\"a\": tr", "{\"a\": \"x y"};
  auto check = [&](const std::vector<std::string>& vocabulary, int words_needed) {
    const TokenTrie trie(vocabulary);
    EbnfAutomaton a(parse_ebnf(grammar));
    for (const std::string& text : texts) {
      EbnfState s = a.start();
      for (char c : text) ASSERT_TRUE(a.step(s, static_cast<uint8_t>(c))) << text;
      std::vector<uint32_t> words(words_needed, 0u);
      trie.allowed_tokens(a, s, words.data(), words_needed);
      EXPECT_EQ(bits_of(words), brute_force(a, s, vocabulary)) << "after '" << text << "'";
    }
  };
  check(small_vocabulary(), 1);
  QWEN3_TOKENIZER_OR_SKIP(tok);
  std::vector<std::string> vocabulary(tok->vocab_size());
  for (int32_t id = 0; id < tok->vocab_size(); ++id)
    if (!tok->is_special(id)) vocabulary[id] = tok->token_bytes(id);
  check(vocabulary, mask_words(tok->vocab_size()));
}

// A constraint's view of a rule over the small vocabulary.
struct Small {
  std::vector<std::string> vocabulary = small_vocabulary();
  std::shared_ptr<const TokenTrie> trie = std::make_shared<const TokenTrie>(vocabulary);
  int32_t id(const std::string& token) const {
    for (size_t t = 0; t < vocabulary.size(); ++t)
      if (vocabulary[t] == token) return static_cast<int32_t>(t);
    ADD_FAILURE() << "no token " << token;
    return -1;
  }
  std::vector<std::string> allowed(TokenConstraint& c) const {
    std::vector<uint32_t> words(1, 0u);
    c.allowed(words.data(), 1);
    std::vector<std::string> out;
    for (int32_t t : bits_of(words)) out.push_back(vocabulary[t]);
    return out;
  }
};

TEST(StructuredGrammar, AConstraintFollowsItsRuleToTheEnd) {
  Small v;
  auto grammar = regex_grammar("1[0-9]{2}|ab", v.trie);
  auto c = grammar->start();
  EXPECT_TRUE(c->active());
  EXPECT_EQ(v.allowed(*c), (std::vector<std::string>{"a", "ab", "1", "12", "123", "ab"}));  // by id
  EXPECT_FALSE(c->complete());
  EXPECT_FALSE(c->advance(v.id("b")));  // refused: the state is unchanged
  EXPECT_TRUE(c->advance(v.id("12")));
  EXPECT_FALSE(c->complete());
  EXPECT_EQ(v.allowed(*c), (std::vector<std::string>{"1", "0", "9"}));
  EXPECT_FALSE(c->advance(v.id("")));  // the special token
  EXPECT_TRUE(c->advance(v.id("9")));
  EXPECT_TRUE(c->complete());
  EXPECT_TRUE(c->finished());
  EXPECT_TRUE(v.allowed(*c).empty());
  // Another request of the same grammar starts over; the first's state is its own.
  auto d = grammar->start();
  EXPECT_FALSE(d->complete());
  EXPECT_TRUE(d->advance(v.id("ab")));
  EXPECT_TRUE(d->finished());
}

TEST(StructuredGrammar, AWholeTextThatMayGoOnIsCompleteNotFinished) {
  Small v;
  auto c = regex_grammar("a[0-9]*", v.trie)->start();
  EXPECT_TRUE(c->advance(v.id("a1")));
  EXPECT_TRUE(c->complete());
  EXPECT_FALSE(c->finished());
}

TEST(StructuredGrammar, JsonModeTakesAnObject) {
  Small v;
  auto c = json_grammar(JsonValueOptions{}, v.trie)->start();
  EXPECT_EQ(v.allowed(*c), (std::vector<std::string>{"{", " ", "{\"", "\n"}));
  for (const char* t : {"{\"", "a", "\":", "true", "}"}) EXPECT_TRUE(c->advance(v.id(t))) << t;
  EXPECT_TRUE(c->complete());
  EXPECT_FALSE(c->finished());  // whitespace may follow under the default options
  EXPECT_FALSE(c->advance(v.id("x")));
  // As JSON mode compiles it: the text ends with the object.
  auto ends = json_grammar(JsonValueOptions{.trailing_whitespace = false}, v.trie)->start();
  for (const char* t : {"{\"", "a", "\":", "true", "}"}) EXPECT_TRUE(ends->advance(v.id(t))) << t;
  EXPECT_TRUE(ends->finished());
  EXPECT_FALSE(ends->advance(v.id(" ")));
}

TEST(StructuredGrammar, AnEbnfConstraintFollowsItsGrammar) {
  Small v;
  auto grammar = ebnf_grammar("root ::= (\"ab\" | \"1\" [0-9]{2}) tail\ntail ::= \"x\"?", v.trie);
  auto c = grammar->start();
  EXPECT_EQ(v.allowed(*c), (std::vector<std::string>{"a", "ab", "1", "12", "123", "ab"}));
  EXPECT_FALSE(c->advance(v.id("b")));
  EXPECT_TRUE(c->advance(v.id("12")));
  EXPECT_EQ(v.allowed(*c), (std::vector<std::string>{"1", "0", "9"}));
  EXPECT_FALSE(c->complete());
  EXPECT_TRUE(c->advance(v.id("9")));
  EXPECT_TRUE(c->complete());  // "x" may follow
  EXPECT_FALSE(c->finished());
  EXPECT_EQ(v.allowed(*c), (std::vector<std::string>{"x"}));
  EXPECT_TRUE(c->advance(v.id("x")));
  EXPECT_TRUE(c->finished());
  EXPECT_THROW(ebnf_grammar("root ::= root \"a\"", v.trie), Error);
}

TEST(StructuredGrammar, TheRuleBeginsAfterTheGivenToken) {
  Small v;
  auto c = regex_grammar("ab", v.trie)->start(v.id("}"));
  EXPECT_FALSE(c->active());
  EXPECT_FALSE(c->finished());
  EXPECT_TRUE(c->advance(v.id("x")));  // free before it
  EXPECT_TRUE(c->advance(v.id("}")));
  EXPECT_TRUE(c->active());
  EXPECT_FALSE(c->advance(v.id("x")));
  EXPECT_TRUE(c->advance(v.id("ab")));
  EXPECT_TRUE(c->finished());
}

void expect_refused(const std::string& pattern, const std::string& says, size_t max_states = 20000) {
  Small v;
  try {
    regex_grammar(pattern, v.trie, max_states);
    ADD_FAILURE() << pattern << " was compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << pattern << ": " << e.what();
  }
}

TEST(StructuredGrammar, RulesThatCannotRunAreRefusedAtCompileTime) {
  expect_refused("a{0}", "only the empty text");
  expect_refused("(?=a)", "(?=");
  // 2^9 states at least to tell the last 9 letters apart: more than the 256 allowed.
  expect_refused("[ab]*a[ab]{8}", "state", 256);
}

TEST(StructuredGrammar, RegexesTooCostlyToBuildAreRefused) {
  // Few automaton states, each of thousands of pattern positions; and a table too large.
  expect_refused("(?:.?){0,5000}", "too large");
  expect_refused("(?:.{0,50}){0,50}", "too large");
  // Few states of large sets, over many byte classes: bounded by the work of building.
  std::string classes = "(?:(?:";
  for (int c = 1; c < 128; ++c) {
    char escape[8];
    std::snprintf(escape, sizeof escape, "\\x%02x", c);
    classes += std::string(c > 1 ? "|" : "") + escape;
  }
  expect_refused(classes + ")?){0,240}", "too large");
}

TEST(TokenTrie, LeavesOutTheAddedTokens) {
  QWEN3_TOKENIZER_OR_SKIP(tok);
  const TokenTrie trie = TokenTrie::of(*tok);
  for (const char* markup : {"</think>", "<tool_call>", "<|im_end|>"}) {
    const auto id = tok->token_id(markup);
    ASSERT_TRUE(id) << markup;
    EXPECT_TRUE(trie.bytes(*id).empty()) << markup;
  }
  EXPECT_EQ(trie.num_tokens() + tok->added_tokens().size(), static_cast<size_t>(tok->vocab_size()));
}

TEST(StructuredGrammars, TheSameRuleIsCompiledOnce) {
  Small v;
  StructuredGrammars grammars(v.trie, 2);
  auto a = grammars.regex("ab");
  EXPECT_EQ(grammars.regex("ab"), a);
  EXPECT_NE(grammars.regex("a1"), a);
  EXPECT_EQ(grammars.json({}), grammars.json({}));
  EXPECT_NE(grammars.regex("ab"), a);  // the least recently used of 2 was let go
  auto e = grammars.ebnf("root ::= \"ab\"");
  EXPECT_EQ(grammars.ebnf("root ::= \"ab\""), e);
  EXPECT_NE(grammars.ebnf("root ::= \"ab\" "), e);  // a grammar's key is its text
  // A byte budget smaller than two grammars keeps one.
  StructuredGrammars small(v.trie, 8, 1);
  auto b = small.regex("ab");
  EXPECT_EQ(small.regex("ab"), b);
  small.regex("a1");
  EXPECT_NE(small.regex("ab"), b);
}

TEST(StructuredOutput, RegexEscapeMatchesExactlyItsText) {
  for (const std::string text :
       {"plain", "a.b*c+?", "(x|y)[z]{2}", "\\d \"q\" ^$ /-", "é 😀 ü", "tab\there\n"}) {
    RegexDfa dfa(regex_escape(text));
    EXPECT_TRUE(dfa.matches(text)) << text;
    EXPECT_FALSE(dfa.matches(text + "x")) << text;
    EXPECT_FALSE(dfa.matches(text.substr(1))) << text;
  }
}

}  // namespace
}  // namespace tpserve::serve
