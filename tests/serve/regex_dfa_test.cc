// RegexDfa: what each construct matches and refuses, UTF-8 at the byte level (checked exhaustively for '.'
// and for the range splitting), dead-state pruning, and the bounds on the automaton's size.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/serve/regex_dfa.h"
#include "runtime/serve/utf8.h"
#include "runtime/serve/utf8_ranges.h"

namespace tpserve::serve {
namespace {

struct Case {
  std::string pattern;
  std::vector<std::string> matching;
  std::vector<std::string> not_matching;
};

void expect_cases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE("pattern " + c.pattern);
    RegexDfa dfa(c.pattern);
    for (const std::string& text : c.matching) EXPECT_TRUE(dfa.matches(text)) << "text '" << text << "'";
    for (const std::string& text : c.not_matching) EXPECT_FALSE(dfa.matches(text)) << "text '" << text << "'";
  }
}

std::string error_of(const std::string& pattern) {
  try {
    RegexDfa dfa(pattern);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_refused(const std::string& pattern, const std::string& message) {
  const std::string error = error_of(pattern);
  EXPECT_NE(error.find(message), std::string::npos) << "pattern '" << pattern << "' gave: " << error;
  EXPECT_EQ(error.rfind("regex: ", 0), 0u) << error;
}

// Every state reachable from the start, exploring all 256 bytes from each.
std::vector<int32_t> reachable(RegexDfa& dfa) {
  std::vector<int32_t> states = {dfa.start()};
  std::vector<bool> seen(1, true);
  for (size_t i = 0; i < states.size(); ++i) {
    for (int b = 0; b < 256; ++b) {
      const int32_t to = dfa.next(states[i], static_cast<uint8_t>(b));
      if (to == RegexDfa::kDead) continue;
      if (static_cast<size_t>(to) >= seen.size()) seen.resize(to + 1, false);
      if (!seen[to]) seen[to] = true, states.push_back(to);
    }
  }
  return states;
}

TEST(RegexDfa, LiteralsAndEscapes) {
  expect_cases({
      {"abc", {"abc"}, {"", "ab", "abcd", "abd", "ABC"}},
      {"", {""}, {"a"}},
      {R"(a\.b\*\+\?\(\)\[\]\{\}\|\^\$\/\-\"\\)", {R"(a.b*+?()[]{}|^$/-"\)"}, {"axb*+?()[]{}|^$/-\"\\"}},
      {R"(\n\r\t\f\v\0)", {std::string("\n\r\t\f\v\0", 6)}, {"nrtfv0"}},
      {R"(\x41\x7a\xe9)", {"Az\xC3\xA9"}, {"Az\xE9"}},
      {R"(\u00e9\u20AC\uD83D\uDE00)", {"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"}, {"e"}},
      {"caf\xC3\xA9", {"caf\xC3\xA9"}, {"cafe", "caf\xC3"}},
      {"a{b}c{", {"a{b}c{"}, {"abc"}},  // braces that are no quantifier are literal, as in Python
      {"a}]", {"a}]"}, {"a"}},
  });
}

TEST(RegexDfa, ShorthandClassesAreAscii) {
  expect_cases({
      {R"(\d+)", {"0", "0123456789"}, {"", "a", "\xD9\xA3"}},  // U+0663 ARABIC-INDIC DIGIT THREE is no \d
      {R"(\D)", {"a", "\xC3\xA9", " "}, {"5", ""}},
      {R"(\w+)", {"azAZ09_"}, {"-", "\xC3\xA9"}},
      {R"(\W)", {"-", "\xC3\xA9"}, {"a", "_"}},
      {R"(\s+)", {" \t\n\r\f\v"}, {"a", "\xC2\xA0"}},
      {R"(\S)", {"a", "\xC2\xA0"}, {" ", "\n"}},
  });
}

TEST(RegexDfa, BracketClasses) {
  expect_cases({
      {"[abc]", {"a", "b", "c"}, {"d", "", "ab"}},
      {"[a-cx-z]+", {"abcxyz"}, {"d", "w"}},
      {"[^abc]", {"d", "\xC3\xA9", "\n"}, {"a", "c", ""}},
      {R"([\d_.])", {"5", "_", "."}, {"a"}},
      {R"([^\d\s])", {"a", "-"}, {"5", " "}},
      {R"([\]\\\-^])", {"]", "\\", "-", "^"}, {"a"}},
      {"[]a]", {"]", "a"}, {"b"}},  // a leading ']' is literal
      {"[-a][a-]", {"-a", "a-"}, {"b-"}},
      {"[\xC3\xA0-\xC3\xBF]", {"\xC3\xA0", "\xC3\xA9", "\xC3\xBF"}, {"\xC3\x9F", "a", "\xC4\x80"}},  // [à-ÿ]
      {R"([^"\\])", {"a", "\xC3\xA9", "\xF0\x9F\x98\x80", "\n"}, {"\"", "\\", "\xC0\x80", "\xED\xA0\x80"}},
      {R"([\x00-\x1F])", {std::string(1, '\0'), "\x1F"}, {" "}},
      {R"([\u0100-\U0001F600])",
       {"\xC4\x80", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"},
       {"\xC3\xBF", "\xF0\x9F\x98\x81"}},
      {R"([\b])", {"\b"}, {"b"}},
  });
}

TEST(RegexDfa, QuantifiersAndTheirLazyForms) {
  expect_cases({
      {"ab*c", {"ac", "abc", "abbbbc"}, {"abd", "bc"}},
      {"ab+c", {"abc", "abbc"}, {"ac"}},
      {"ab?c", {"ac", "abc"}, {"abbc"}},
      {"a{3}", {"aaa"}, {"aa", "aaaa"}},
      {"a{2,}", {"aa", "aaaaaaa"}, {"a"}},
      {"a{2,4}", {"aa", "aaa", "aaaa"}, {"a", "aaaaa"}},
      {"a{,2}", {"", "a", "aa"}, {"aaa"}},
      {"a{0}b", {"b"}, {"ab"}},
      {"a*?b+?c??d{1,2}?", {"bd", "aabbcdd"}, {"acd", "abdddd"}},
      {"(?:ab){2}", {"abab"}, {"ab", "aab"}},
      {"(a|bc){1,3}", {"a", "bca", "abcbc"}, {"", "abcbca", "b"}},
      {"(a*)*b", {"b", "aaab"}, {"a"}},
      {"(a?){3}", {"", "a", "aaa"}, {"aaaa"}},
  });
}

TEST(RegexDfa, GroupsAlternationAndAnchors) {
  expect_cases({
      {"ab|cd", {"ab", "cd"}, {"abcd", "ad"}},
      {"a(b|c)d", {"abd", "acd"}, {"ad", "abcd"}},
      {"(a|)", {"a", ""}, {"aa"}},
      {"(|a)b", {"b", "ab"}, {"a"}},
      {"a||b", {"a", "", "b"}, {"ab"}},
      {"(?P<year>[0-9]{4})-(?<month>[0-9]{2})", {"2024-05"}, {"2024-5"}},
      {"^abc$", {"abc"}, {"^abc$", "abcd"}},
      {"^a$|^b$", {"a", "b"}, {"ab"}},
      {"((a))", {"a"}, {""}},
      {"()", {""}, {"a"}},
  });
}

TEST(RegexDfa, DotMatchesAnyCodePointButNewline) {
  expect_cases({
      {".",
       {"a", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\x7F", std::string(1, '\0')},
       {"\n", "", "ab", "\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\x80", "\xC3", "\xFF",
        "\xE0\x80\xAF"}},
      {".*", {"", "caf\xC3\xA9 \xF0\x9F\x98\x80"}, {"a\nb", "a\xC3"}},
  });
}

// '.' over every string of 1 to 3 bytes (and four-byte strings of edge bytes): accepted exactly when it is
// one valid UTF-8 code point other than '\n'.
TEST(RegexDfa, DotAcceptsExactlyValidUtf8Exhaustively) {
  RegexDfa dfa(".");
  auto valid_one = [](const std::string& s) {
    std::vector<char32_t> cps;
    return decode_utf8(s, cps) && cps.size() == 1 && cps[0] != '\n';
  };
  size_t accepted = 0;
  for (int a = 0; a < 256; ++a) {
    const int32_t sa = dfa.next(dfa.start(), static_cast<uint8_t>(a));
    EXPECT_EQ(dfa.accepting(sa), valid_one(std::string(1, static_cast<char>(a)))) << a;
    for (int b = 0; b < 256; ++b) {
      const int32_t sb = dfa.next(sa, static_cast<uint8_t>(b));
      const std::string ab = {static_cast<char>(a), static_cast<char>(b)};
      ASSERT_EQ(dfa.accepting(sb), valid_one(ab)) << a << " " << b;
      for (int c = 0; c < 256; ++c) {
        const int32_t sc = dfa.next(sb, static_cast<uint8_t>(c));
        accepted += dfa.accepting(sc);
        // Only a lead byte E0..EF starts a 3-byte code point; only F0..F4 may still be live after 3 bytes.
        const std::string abc = ab + static_cast<char>(c);
        if (a >= 0xE0 && a <= 0xEF) {
          ASSERT_EQ(dfa.accepting(sc), valid_one(abc)) << a << " " << b << " " << c;
        }
        if (a < 0xF0 || a > 0xF4) {
          ASSERT_TRUE(sc == RegexDfa::kDead || dfa.accepting(sc)) << a << " " << b << " " << c;
        }
      }
    }
  }
  EXPECT_EQ(accepted, 0xFFFFu - 0x800u + 1 - 0x800u);  // the 3-byte code points but surrogates
  const std::vector<uint8_t> edges = {0x00, 0x7F, 0x80, 0x8F, 0x90, 0xBF, 0xC0, 0xFF};
  for (int a = 0xEF; a <= 0xF8; ++a) {
    for (uint8_t b : edges) {
      for (uint8_t c : edges) {
        for (uint8_t d : edges) {
          const std::string s = {static_cast<char>(a), static_cast<char>(b), static_cast<char>(c),
                                 static_cast<char>(d)};
          EXPECT_EQ(dfa.matches(s), valid_one(s)) << a << " " << int{b} << " " << int{c} << " " << int{d};
        }
      }
    }
  }
}

// The splitting itself: over all code points, an encoding is covered iff the code point is in the range,
// and the sequences cover no other byte strings (their sizes add up to the number of code points).
TEST(RegexDfa, Utf8RangeSplittingIsExact) {
  const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0, 0x10FFFF},    {0x41, 0x5A},      {0x7F, 0x80},        {0xE0, 0xFF},     {0x7FF, 0x801},
      {0xD000, 0xE0FF}, {0xFFFF, 0x10000}, {0x12345, 0x10ABCD}, {0xD800, 0xDFFF}, {0x3A5, 0x2F1C7}};
  for (auto [lo, hi] : ranges) {
    SCOPED_TRACE(std::to_string(lo) + ".." + std::to_string(hi));
    const std::vector<Utf8Sequence> sequences = utf8_sequences(lo, hi);
    size_t covered = 0;
    for (const Utf8Sequence& seq : sequences) {
      size_t n = 1;
      for (ByteRange r : seq) n *= r.hi - r.lo + 1u;
      covered += n;
    }
    size_t expected = 0;
    for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      const bool in = cp >= lo && cp <= hi;
      expected += in;
      std::string bytes;
      append_utf8(bytes, cp);
      bool found = false;
      for (const Utf8Sequence& seq : sequences) {
        if (seq.size() != bytes.size()) continue;
        bool all = true;
        for (size_t i = 0; i < seq.size(); ++i) {
          const auto byte = static_cast<uint8_t>(bytes[i]);
          all = all && seq[i].lo <= byte && byte <= seq[i].hi;
        }
        found = found || all;
      }
      if (found != in) {
        ADD_FAILURE() << "code point " << static_cast<uint32_t>(cp) << (in ? " not covered" : " covered");
        break;
      }
    }
    EXPECT_EQ(covered, expected);
  }
}

TEST(RegexDfa, DeadStatesArePruned) {
  RegexDfa alt("ab|ac");
  const int32_t a = alt.next(alt.start(), 'a');
  EXPECT_NE(a, RegexDfa::kDead);
  EXPECT_FALSE(alt.accepting(a));
  EXPECT_EQ(alt.next(a, 'x'), RegexDfa::kDead);
  EXPECT_TRUE(alt.accepting(alt.next(a, 'c')));
  EXPECT_EQ(alt.next(alt.start(), 'b'), RegexDfa::kDead);
  EXPECT_EQ(alt.next(RegexDfa::kDead, 'a'), RegexDfa::kDead);
  EXPECT_FALSE(alt.accepting(RegexDfa::kDead));

  RegexDfa digits("a[0-9]{2}");
  const int32_t a1 = digits.next(digits.next(digits.start(), 'a'), '1');
  EXPECT_NE(a1, RegexDfa::kDead);
  EXPECT_FALSE(digits.accepting(a1));
  EXPECT_TRUE(digits.accepting(digits.next(a1, '2')));
  EXPECT_EQ(digits.next(digits.next(a1, '2'), '3'), RegexDfa::kDead);

  // After "ab" the NFA still has a 'c' edge, but it leads only into an empty class: no match can follow,
  // so "ab" is dead at once (not one byte later).
  RegexDfa empty_tail(R"(a(bc[^\x00-\U0010FFFF])?)");
  const int32_t ea = empty_tail.next(empty_tail.start(), 'a');
  EXPECT_TRUE(empty_tail.accepting(ea));
  EXPECT_EQ(empty_tail.next(ea, 'b'), RegexDfa::kDead);
  // A truncated UTF-8 prefix is live only where a valid continuation exists.
  RegexDfa dot(".");
  EXPECT_NE(dot.next(dot.start(), 0xE0), RegexDfa::kDead);
  EXPECT_EQ(dot.next(dot.next(dot.start(), 0xE0), 0x80), RegexDfa::kDead);  // overlong
  EXPECT_EQ(dot.next(dot.start(), 0xF5), RegexDfa::kDead);
  // A pattern that matches nothing starts dead.
  EXPECT_EQ(RegexDfa(R"([^\x00-\U0010FFFF])").start(), RegexDfa::kDead);
}

TEST(RegexDfa, EveryLiveStateCanStillMatch) {
  for (const char* pattern : {"ab|ac", R"([a-z]{2,5}@[a-z]+\.(com|org))", R"((xy[^\x00-\U0010FFFF]|y)*z)",
                              ".{3}", R"("(?:[^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}){0,4}")"}) {
    SCOPED_TRACE(pattern);
    RegexDfa dfa(pattern);
    const std::vector<int32_t> states = reachable(dfa);
    // Backwards from the accepting states over the explored transitions.
    std::vector<bool> can_match(dfa.num_states(), false);
    bool changed = true;
    while (changed) {
      changed = false;
      for (int32_t s : states) {
        if (can_match[s]) continue;
        bool yes = dfa.accepting(s);
        for (int b = 0; b < 256 && !yes; ++b) {
          const int32_t to = dfa.next(s, static_cast<uint8_t>(b));
          yes = to != RegexDfa::kDead && can_match[to];
        }
        if (yes) can_match[s] = true, changed = true;
      }
    }
    for (int32_t s : states) EXPECT_TRUE(can_match[s]) << "state " << s;
  }
}

TEST(RegexDfa, StatesAreMadeLazilyAndCached) {
  RegexDfa dfa("[a-z]+[0-9]");
  EXPECT_EQ(dfa.num_states(), 1u);
  EXPECT_TRUE(dfa.matches("abc7"));
  const size_t made = dfa.num_states();
  EXPECT_GE(made, 2u);
  EXPECT_TRUE(dfa.matches("zz0"));
  EXPECT_FALSE(dfa.matches("7"));
  EXPECT_EQ(dfa.num_states(), made);
  EXPECT_LE(dfa.num_byte_classes(), 5u);  // [a-z], [0-9] and the bytes around them
}

TEST(RegexDfa, StateCountIsBounded) {
  // The 13th byte from the end must be 'a': 2^13 DFA states, more than the 1000 allowed.
  RegexDfa dfa("(a|b)*a(a|b){12}", 1000);
  try {
    reachable(dfa);
    ADD_FAILURE() << "no error with " << dfa.num_states() << " states";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than 1000 automaton states"), std::string::npos) << e.what();
  }
  EXPECT_LE(dfa.num_states(), 1000u);
  RegexDfa enough("(a|b)*a(a|b){12}", 20000);
  EXPECT_EQ(reachable(enough).size(), 8192u);
}

TEST(RegexDfa, HugeRepetitionIsRefused) {
  expect_refused("a{10000000}", "repetition '{10000000}' at offset 1 is too large");
  expect_refused("(ab{1000}){10000}", "repetition '{10000}' at offset 10 is too large");
  expect_refused("x{99999999999999999999}", "too large");
  EXPECT_TRUE(RegexDfa("a{1000}").matches(std::string(1000, 'a')));
}

TEST(RegexDfa, UnsupportedConstructsAreRefusedWithTheirOffset) {
  expect_refused("abc(?=d)", "unsupported construct '(?=' (lookahead) at offset 3");
  expect_refused("a(?!b)", "'(?!' (lookahead)");
  expect_refused("(?<=a)b", "'(?<=' (lookbehind) at offset 0");
  expect_refused("(?<!a)b", "'(?<!' (lookbehind)");
  expect_refused(R"((a)\1)", R"('\1' (backreference) at offset 3)");
  expect_refused("(?P<x>a)(?P=x)", "'(?P=' (backreference)");
  expect_refused(R"((?<x>a)\k<x>)", R"('\k' (backreference))");
  expect_refused("a^b", "'^' (anchor inside the pattern) at offset 1");
  expect_refused("a$b", "'$' (anchor inside the pattern) at offset 1");
  expect_refused("(^a)", "'^' (anchor inside the pattern)");
  expect_refused(R"(a\b)", R"('\b' (word boundary) at offset 1)");
  expect_refused(R"(\Ba)", R"('\B' (word boundary))");
  expect_refused(R"(\Aa)", R"('\A' (anchor))");
  expect_refused("a*+", "'*+' (possessive quantifier) at offset 1");
  expect_refused("a{2}+", "'{2}+' (possessive quantifier)");
  expect_refused("(?i)abc", "'(?i' (inline flags) at offset 0");
  expect_refused("(?>a)", "'(?>' (atomic group)");
  expect_refused(R"(\p{L})", R"('\p' (Unicode property))");
}

TEST(RegexDfa, SyntaxErrorsAreRefusedWithTheirOffset) {
  expect_refused("(ab", "missing ')' for the '(' at offset 0");
  expect_refused("a(b(c)", "missing ')' for the '(' at offset 1");
  expect_refused("ab)", "unbalanced parenthesis ')' at offset 2");
  expect_refused("[z-a]", "bad character range 'z-a' at offset 1");
  expect_refused(R"([\d-z])", "bad character range");
  expect_refused("[abc", "unterminated character class '[' at offset 0");
  expect_refused("*a", "nothing to repeat before '*' at offset 0");
  expect_refused("a|+", "nothing to repeat before '+' at offset 2");
  expect_refused("(?:{2})", "nothing to repeat before '{2}'");
  expect_refused("^*", "nothing to repeat");
  expect_refused("a**", "multiple repeat '*' at offset 2");
  expect_refused("a{3,2}", "bad repetition '{3,2}' (min > max) at offset 1");
  expect_refused(R"(\q)", R"(bad escape '\q' at offset 0)");
  expect_refused(R"(\x4)", "incomplete escape");
  expect_refused(R"(\uD800)", "lone surrogate");
  expect_refused("a\\", "incomplete escape '\\' at offset 1");
  expect_refused("\xC3\xA9(", "missing ')' for the '(' at offset 1");  // offsets count code points
  expect_refused("a\xFF", "not valid UTF-8");
  expect_refused(std::string(300, '(') + std::string(300, ')'), "nested deeper than");
}

}  // namespace
}  // namespace tpserve::serve
