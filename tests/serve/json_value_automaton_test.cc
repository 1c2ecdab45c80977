// JsonValueAutomaton: tables of valid and invalid texts, the depth and whitespace limits, state equality,
// and nlohmann::json as the reference: exhaustive short texts, random values and random mutations of them.
// Every state reached is checked to be completable by a greedy completion that nlohmann must accept.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/serve/json_value_automaton.h"

namespace tpserve::serve {
namespace {

using State = JsonValueState;

JsonValueOptions any_value(int max_depth = 32, int max_whitespace_run = 16) {
  return JsonValueOptions{false, max_depth, max_whitespace_run};
}

// Steps over the text; returns false at the first refused byte.
bool walk(const JsonValueAutomaton& a, State& s, std::string_view text) {
  for (const char c : text) {
    if (!a.step(s, static_cast<uint8_t>(c))) return false;
  }
  return true;
}

State state_after(const JsonValueAutomaton& a, std::string_view text) {
  State s = a.start();
  EXPECT_TRUE(walk(a, s, text)) << text;
  return s;
}

// nlohmann refuses numbers that overflow a double ("1e400"), a range limit rather than syntax: every digit of
// an exponent (after a digit, e/E and an optional sign) becomes 0. That changes no text's validity, not even
// within a \uXXXX escape, whose surrogate class is set by its first two digits.
std::string without_exponent_digits(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if ((text[i] != 'e' && text[i] != 'E') || i == 0 || !std::isdigit(static_cast<uint8_t>(text[i - 1])))
      continue;
    if (i + 1 < text.size() && (text[i + 1] == '+' || text[i + 1] == '-')) out += text[++i];
    for (; i + 1 < text.size() && std::isdigit(static_cast<uint8_t>(text[i + 1])); ++i) out += '0';
  }
  return out;
}

// The reference verdict: nlohmann::json accepts the text, and it meets the options. The depth and whitespace
// runs are measured by a scan that is right for valid JSON only, which is all it is asked about.
bool reference_accepts(const std::string& text, const JsonValueOptions& options) {
  // nlohmann skips a byte order mark; RFC 8259 texts have none.
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) return false;
  // nlohmann stops at a NUL byte as at the end of input; JSON allows none, in strings or out.
  if (text.find('\0') != std::string::npos) return false;
  const nlohmann::json value = nlohmann::json::parse(without_exponent_digits(text), nullptr, false);
  if (value.is_discarded() || (options.top_level_object && !value.is_object())) return false;
  int depth = 0, max_depth = 0, run = 0, max_run = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
      max_run = std::max(max_run, ++run);
      continue;
    }
    run = 0;
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') max_depth = std::max(max_depth, ++depth);
    if (c == '}' || c == ']') --depth;
  }
  return max_depth <= options.max_depth && max_run <= options.max_whitespace_run;
}

// Completes a state without whitespace by trying bytes in an order that always makes progress (closing what
// is open first). Only bytes the automaton takes are used, so failing to finish means `s` was a dead end.
bool complete(const JsonValueAutomaton& a, State s, std::string& suffix) {
  static const std::string kOrder = "\"}]0:dc\\uraelsn\x80\x90\xA0{";
  for (int i = 0; i < 10000 && !a.accepting(s); ++i) {
    const auto it = std::find_if(kOrder.begin(), kOrder.end(), [&](char c) { return a.step(s, c); });
    if (it == kOrder.end()) return false;
    suffix += *it;
  }
  return a.accepting(s);
}

// Checks that the state after `prefix` completes to a text that both the automaton and nlohmann accept.
void expect_completable(const JsonValueAutomaton& a, const State& s, const std::string& prefix) {
  std::string suffix;
  ASSERT_TRUE(complete(a, s, suffix)) << "dead end after: " << prefix;
  const std::string text = prefix + suffix;
  EXPECT_TRUE(a.matches(text)) << text;
  EXPECT_TRUE(reference_accepts(text, a.options())) << text;
}

TEST(JsonValueAutomaton, ValidTexts) {
  const JsonValueAutomaton a(any_value());
  for (const char* text : {"0",
                           "-0",
                           "12",
                           "-12.5e+3",
                           "1E5",
                           "1e-5",
                           "0.0",
                           "10.01E0",
                           "true",
                           "false",
                           "null",
                           "\"\"",
                           "\"a b\"",
                           "\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"",
                           "\"\\u00e9\\u00E9\\uABCD\"",
                           "\"\\ud83d\\ude00\"",
                           "\"\\uDBFF\\uDFFF\"",
                           "[]",
                           "{}",
                           "[1,2,[3,{}]]",
                           "{\"a\":1,\"b\":[true,false,null],\"c\":{\"d\":\"e\"}}",
                           " \t\n\r{ \"a\" : [ 1 , 2 ] }\n",
                           "[-0.5,1e2]",
                           "{\"\":\"\"}",
                           "\"\xC3\xA9\"",
                           "\"\xF0\x9F\x98\x80\"",
                           "\"\xE2\x82\xAC\xF4\x8F\xBF\xBF\"",
                           "\"\xED\x9F\xBF\xEE\x80\x80\""}) {
    EXPECT_TRUE(a.matches(text)) << text;
    EXPECT_TRUE(reference_accepts(text, a.options())) << text;  // the table itself is right
  }
}

TEST(JsonValueAutomaton, InvalidTexts) {
  const JsonValueAutomaton a(any_value());
  for (const char* text : {"",
                           " ",
                           "01",
                           "-01",
                           "1.",
                           ".5",
                           "-",
                           "1e",
                           "1e+",
                           "+1",
                           "1.e5",
                           "0x1",
                           "[1,]",
                           "[,1]",
                           "[1 2]",
                           "{\"a\":1,}",
                           "{\"a\"}",
                           "{\"a\":}",
                           "{1:2}",
                           "{a:1}",
                           "{\"a\" 1}",
                           "\"\\x\"",
                           "\"\\u12\"",
                           "\"\\u12G4\"",
                           "\"a\nb\"",
                           "\"\t\"",
                           "\"abc",
                           "tru",
                           "nul",
                           "truex",
                           "True",
                           "[1]]",
                           "{}}",
                           "[}",
                           "{]",
                           "1 2",
                           "\"\\ud800\"",
                           "\"\\udc00\"",
                           "\"\\ud800\\u0041\"",
                           "\"\\ud800\\udbff\"",
                           "\"\\ud800x\"",
                           "\"\xC0\x80\"",
                           "\"\xC1\xBF\"",
                           "\"\xE0\x80\x80\"",
                           "\"\xE0\x9F\xBF\"",
                           "\"\xED\xA0\x80\"",
                           "\"\xED\xBF\xBF\"",
                           "\"\xF0\x80\x80\x80\"",
                           "\"\xF4\x90\x80\x80\"",
                           "\"\xF5\x80\x80\x80\"",
                           "\"\xFF\"",
                           "\"\x80\"",
                           "\"\xC3\"",
                           "\"\xC3\x41\"",
                           "\"\xE2\x82\"",
                           "[\"a\":1]"}) {
    EXPECT_FALSE(a.matches(text)) << text;
    EXPECT_FALSE(reference_accepts(text, a.options())) << text;
  }
}

TEST(JsonValueAutomaton, TopLevelObjectOption) {
  const JsonValueAutomaton object_only;  // the default: OpenAI's JSON mode
  const JsonValueAutomaton any(any_value());
  for (const char* text : {"[1]", "3", "\"s\"", "null", " [ ]"}) {
    EXPECT_FALSE(object_only.matches(text)) << text;
    EXPECT_TRUE(any.matches(text)) << text;
  }
  EXPECT_TRUE(object_only.matches(" {\"a\": [1, \"x\"]} "));
  State s = object_only.start();
  EXPECT_FALSE(object_only.step(s, '['));  // refused up front, not at the end
}

TEST(JsonValueAutomaton, NumbersEndImplicitly) {
  const JsonValueAutomaton a(any_value());
  for (const char* text : {"12", "0", "-3.25", "1e7", "12 "}) {
    EXPECT_TRUE(a.accepting(state_after(a, text))) << text;
  }
  for (const char* text : {"-", "1.", "1e", "1e-"}) EXPECT_FALSE(a.accepting(state_after(a, text))) << text;
  State s = state_after(a, "[12");
  EXPECT_FALSE(a.accepting(s));
  EXPECT_TRUE(a.step(s, ','));  // the comma ends the number and separates elements
  s = state_after(a, "0");
  EXPECT_FALSE(a.step(s, '1'));
  EXPECT_TRUE(a.matches("{\"a\":1}") && a.matches("[1.5e3]") && a.matches("[0 ,1\n]"));
}

TEST(JsonValueAutomaton, DepthLimit) {
  for (const int max_depth : {1, 3, 32, 64}) {
    const JsonValueAutomaton a(any_value(max_depth));
    const std::string at_limit = std::string(max_depth, '[') + std::string(max_depth, ']');
    EXPECT_TRUE(a.matches(at_limit)) << max_depth;
    EXPECT_FALSE(a.matches("[" + at_limit + "]")) << max_depth;
    State s = state_after(a, std::string(max_depth, '['));
    EXPECT_FALSE(a.step(s, '['));
    EXPECT_FALSE(a.step(s, '{'));
    EXPECT_TRUE(a.step(s, '1'));  // a scalar still fits
  }
  // Random mixes of objects and arrays at the deepest depth: the bit stack must close each with its own
  // bracket.
  std::mt19937_64 rng(7);
  const JsonValueAutomaton a(any_value(64));
  for (int trial = 0; trial < 100; ++trial) {
    std::string open, close;
    for (int d = 0; d < 64; ++d) {
      const bool object = rng() & 1;
      open += object ? "{\"k\":" : "[";
      close.insert(close.begin(), object ? '}' : ']');
    }
    EXPECT_TRUE(a.matches(open + "0" + close));
    const size_t flip = rng() % 64;
    close[flip] = close[flip] == '}' ? ']' : '}';
    EXPECT_FALSE(a.matches(open + "0" + close));
  }
  EXPECT_THROW(JsonValueAutomaton(any_value(65)), Error);
  EXPECT_THROW(JsonValueAutomaton(JsonValueOptions{true, 0, 16}), Error);
  EXPECT_FALSE(JsonValueAutomaton(any_value(0)).matches("[]"));
  EXPECT_TRUE(JsonValueAutomaton(any_value(0)).matches("1"));
}

TEST(JsonValueAutomaton, WhitespaceRuns) {
  const JsonValueAutomaton a;  // runs of at most 16
  const std::string ws16 = " \t\n\r \t\n\r \t\n\r \t\n\r", ws17 = ws16 + " ";
  for (const auto& [text, ok] : std::vector<std::pair<std::string, bool>>{
           {ws16 + "{}", true},
           {ws17 + "{}", false},
           {"{}" + ws16, true},
           {"{}" + ws17, false},
           {"{" + ws16 + "}", true},
           {"{" + ws17 + "}", false},
           {"{\"a\"" + ws16 + ":" + ws16 + "1" + ws16 + "," + ws16 + "\"b\":[" + ws16 + "2" + ws16 + "]}",
            true},
           {"{\"a\":1" + ws17 + "}", false},
           {"{\"a\":[1," + ws17 + "2]}", false},
           {"{\"a\":\"" + std::string(100, ' ') + "\"}", true},  // no limit within strings
       }) {
    EXPECT_EQ(a.matches(text), ok) << text;
  }
  const JsonValueAutomaton none(JsonValueOptions{true, 32, 0});
  EXPECT_TRUE(none.matches("{\"a\":[1,\" \"]}"));
  EXPECT_FALSE(none.matches("{ }"));
  EXPECT_FALSE(none.matches("{}\n"));
}

TEST(JsonValueAutomaton, RefusalLeavesStateUnchanged) {
  const JsonValueAutomaton a(any_value(4, 2));
  int refusals = 0;
  for (const char* text :
       {"{\"a\\u00e9\\ud83d\\ude00\xC3\xA9\xF0\x9F\x98\x80\": [-1.5e+3, true, null, {}] }  ", "[[[[0]]]]",
        "  -0.0E-0"}) {
    State s = a.start();
    for (const char* c = text; *c; ++c) {
      for (int b = 0; b < 256; ++b) {
        State t = s;
        if (!a.step(t, static_cast<uint8_t>(b))) {
          ++refusals;
          EXPECT_EQ(t, s) << "byte " << b << " after " << std::string(text, c);
        }
      }
      ASSERT_TRUE(a.step(s, static_cast<uint8_t>(*c))) << std::string(text, c + 1);
    }
  }
  EXPECT_GT(refusals, 1000);
}

TEST(JsonValueAutomaton, EqualFuturesGiveEqualStates) {
  const JsonValueAutomaton a;
  const JsonValueStateHash hash;
  const std::vector<std::pair<std::string, std::string>> equal = {
      {"{\"a\": 1, ", "{\"bb\": [true], "},  // a key at depth 1
      {"{\"a\":\"x", "{\"a\":\"yyy"},        // in a value string
      {"{\"a\":\"\xC3\xA9", "{\"a\":\"e"},
      {"{\"a\":\"\\n", "{\"a\":\"\\u00e9"},  // an escape leaves no trace
      {"{\"a\":\"\\u00", "{\"a\":\"\\u0D"},
      {"{\"a\":[[1],", "{\"a\":[{\"k\":null},"},
      {"{\"a\":{\"b\":[]}", "{\"a\":true"},  // after a value at depth 1
      {"{\"a\":[1]", "{\"a\":{}"},
      {"{\"a\":tr", "{\"x\":tr"},
      {"{\"a\":\"x\", ", "{\"b\":1, "},  // whether the last string was a key or a value is forgotten
  };
  for (const auto& [x, y] : equal) {
    const State sx = state_after(a, x), sy = state_after(a, y);
    EXPECT_EQ(sx, sy) << x << " vs " << y;
    EXPECT_EQ(hash(sx), hash(sy)) << x << " vs " << y;
  }
  const std::vector<std::pair<std::string, std::string>> different = {
      {"{\"a\": 1, ", "{\"a\": 1,"},  // the whitespace run counts
      {"{\"a\":[", "{\"a\":{"},      {"{\"a\":[", "{\"a\":[1,"},  {"{\"a\":\"\\uD", "{\"a\":\"\\u0"},
      {"{\"a\":\"x", "{\"x"},        {"{\"a\":tr", "{\"a\":fa"},  {"{\"a\":[{", "{\"a\":{\"b\":{"},
      {"{\"a\":1", "{\"a\":1."},     {"{\"a\":1", "{\"a\":true"},  // a number may grow
  };
  for (const auto& [x, y] : different) {
    const State sx = state_after(a, x), sy = state_after(a, y);
    EXPECT_NE(sx, sy) << x << " vs " << y;
    EXPECT_NE(hash(sx), hash(sy)) << x << " vs " << y;  // not required, but expected of a good hash
  }
}

// Every text of up to `length` bytes over the alphabet, against nlohmann; every state reached is completable.
void check_exhaustively(const std::string& start, const std::string& alphabet, int length, int min_accepted) {
  const JsonValueAutomaton a(any_value());
  std::vector<std::pair<std::string, State>> level = {{start, state_after(a, start)}};
  int accepted = 0;
  for (int n = 1; n <= length; ++n) {
    std::vector<std::pair<std::string, State>> next;
    for (const auto& [prefix, s] : level) {
      for (const char c : alphabet) {
        const std::string text = prefix + c;
        State t = s;
        const bool stepped = a.step(t, static_cast<uint8_t>(c));
        const bool ok = stepped && a.accepting(t);
        ASSERT_EQ(ok, reference_accepts(text, a.options())) << text;
        accepted += ok;
        if (!stepped) continue;
        expect_completable(a, t, text);
        next.emplace_back(text, t);
      }
    }
    level = std::move(next);
  }
  EXPECT_GE(accepted, min_accepted);
}

TEST(JsonValueAutomaton, ExhaustiveNumbers) {
  check_exhaustively("", "01-.eE+ ", 7, 100);
}

TEST(JsonValueAutomaton, ExhaustiveStructure) {
  check_exhaustively("", "[]{},:\"1 ", 6, 100);
}

TEST(JsonValueAutomaton, ExhaustiveStringEscapes) {
  check_exhaustively("", "\"\\uDd8c0a", 7, 100);
  check_exhaustively("[\"\\uD8c0\\", "uDdCc80\"]\\", 7, 1);  // after a high surrogate: \uDCxx or nothing
}

nlohmann::json random_value(std::mt19937_64& rng, int depth_left) {
  static const std::vector<std::string> kPieces = {
      "a",  "key",  " ",    "\xC3\xA9", "\xF0\x9F\x98\x80", "\xE4\xB8\xAD", "\"", "\\", "/", "\n",
      "\t", "\x01", "\x1F", "\x7F"};
  auto random_string = [&] {
    std::string out;
    for (int n = rng() % 5; n > 0; --n) out += kPieces[rng() % kPieces.size()];
    return out;
  };
  const int kind = static_cast<int>(rng() % (depth_left > 0 ? 9 : 6));
  switch (kind) {
    case 0:
      return nullptr;
    case 1:
      return static_cast<bool>(rng() & 1);
    case 2:
      return static_cast<int64_t>(rng()) >> (rng() % 64);
    case 3:
      return std::ldexp(static_cast<double>(static_cast<int32_t>(rng())),
                        static_cast<int>(rng() % 200) - 100);
    case 4:
    case 5:
      return random_string();
    case 6: {
      nlohmann::json array = nlohmann::json::array();
      for (int n = rng() % 4; n > 0; --n) array.push_back(random_value(rng, depth_left - 1));
      return array;
    }
    default: {
      nlohmann::json object = nlohmann::json::object();
      for (int n = rng() % 4; n > 0; --n) object[random_string()] = random_value(rng, depth_left - 1);
      return object;
    }
  }
}

std::string random_dump(std::mt19937_64& rng, const nlohmann::json& value) {
  const int indent = static_cast<int>(rng() % 4) - 1;  // -1: compact
  return value.dump(indent, (rng() & 1) ? ' ' : '\t', /*ensure_ascii=*/rng() & 1);
}

TEST(JsonValueAutomaton, RandomValuesStepThroughEveryPrefix) {
  std::mt19937_64 rng(1);
  int texts = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const nlohmann::json value = random_value(rng, 6);
    const std::string text = random_dump(rng, value);
    const JsonValueAutomaton a(JsonValueOptions{value.is_object() && (rng() & 1), 64, 255});
    State s = a.start();
    for (size_t i = 0; i < text.size(); ++i) {
      ASSERT_TRUE(a.step(s, static_cast<uint8_t>(text[i]))) << text.substr(0, i + 1);
      if (!value.is_number()) {
        ASSERT_EQ(a.accepting(s), i + 1 == text.size()) << text.substr(0, i + 1);
      }
      if (rng() % 8 == 0) expect_completable(a, s, text.substr(0, i + 1));
    }
    ASSERT_TRUE(a.accepting(s)) << text;
    texts += value.is_structured();
  }
  EXPECT_GT(texts, 500);
}

TEST(JsonValueAutomaton, RandomMutationsAgreeWithNlohmann) {
  static const std::string kBytes =
      "{}[]\":,.-+eE0123456789tfnrulsa\\/ \n\t\rDd8c\xC3\xA9\xED\xA0\xF0\x9F\xE0\x80\xC0";
  std::mt19937_64 rng(2);
  int accepted = 0, refused = 0;
  for (int trial = 0; trial < 100000; ++trial) {
    const nlohmann::json value = random_value(rng, 5);
    std::string text = random_dump(rng, value);
    for (int n = 1 + rng() % 3; n > 0; --n) {
      const char byte = (rng() % 4 == 0) ? static_cast<char>(rng()) : kBytes[rng() % kBytes.size()];
      const size_t at = text.empty() ? 0 : rng() % (text.size() + 1);
      switch (rng() % 3) {
        case 0:
          text.insert(at, 1, byte);
          break;
        case 1:
          if (at < text.size()) text[at] = byte;
          break;
        default:
          if (at < text.size()) text.erase(at, 1);
      }
    }
    // Small limits, so that they decide some cases; the reference accounts for them.
    const JsonValueAutomaton a(
        JsonValueOptions{(rng() & 1) != 0, 1 + static_cast<int>(rng() % 6), 4 + static_cast<int>(rng() % 8)});
    const bool expected = reference_accepts(text, a.options());
    ASSERT_EQ(a.matches(text), expected) << text;
    (expected ? accepted : refused)++;
    // The longest prefix the automaton takes must still be completable.
    State s = a.start();
    size_t i = 0;
    while (i < text.size() && a.step(s, static_cast<uint8_t>(text[i]))) ++i;
    expect_completable(a, s, text.substr(0, i));
  }
  EXPECT_GT(accepted, 5000);
  EXPECT_GT(refused, 20000);
}

TEST(JsonValueAutomaton, EveryByteTakenLeadsToACompletableState) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const nlohmann::json value = random_value(rng, 4);
    const std::string text = random_dump(rng, value);
    const JsonValueAutomaton a(JsonValueOptions{false, 8, 8});
    State s = a.start();
    for (size_t i = 0; i <= text.size(); ++i) {
      const std::string prefix = text.substr(0, i);
      if (rng() % 4 == 0) {
        for (int b = 0; b < 256; ++b) {
          State t = s;
          if (a.step(t, static_cast<uint8_t>(b))) expect_completable(a, t, prefix + static_cast<char>(b));
        }
      }
      if (i < text.size()) {
        ASSERT_TRUE(a.step(s, static_cast<uint8_t>(text[i]))) << text.substr(0, i + 1);
      }
    }
  }
}

TEST(JsonValueAutomaton, WithoutTrailingWhitespaceTheTextEndsWithTheValue) {
  JsonValueAutomaton a(JsonValueOptions{.trailing_whitespace = false});
  EXPECT_TRUE(a.matches("{}"));
  EXPECT_TRUE(a.matches(" {\"a\": [1, 2]}"));  // leading and inner whitespace stay
  EXPECT_FALSE(a.matches("{} "));
  EXPECT_FALSE(a.matches("{}\n"));
  EXPECT_TRUE(JsonValueAutomaton().matches("{}\n"));
}

}  // namespace
}  // namespace tpserve::serve
