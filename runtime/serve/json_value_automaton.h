// JsonValueAutomaton: a byte-level pushdown automaton that recognises JSON text (RFC 8259) one byte at a
// time, for structured output (OpenAI's response_format {"type": "json_object"}). The token mask walks a
// trie of the vocabulary and copies the state at every trie node, so the state is a 16-byte trivially
// copyable value with no heap: the container kinds of the open objects/arrays are a bit stack in a uint64_t
// (hence max_depth <= 64) and the lexer progress is a handful of small counters. The state is also a
// memoization key, so counters that no longer matter are reset to 0: two prefixes that admit the same
// futures (e.g. `{"a": 1, ` and `{"bb": [true], `) reach equal states.
//
// Beyond the RFC grammar the automaton refuses what a strict parser refuses and what a client cannot use:
// ill-formed UTF-8 in strings (overlongs, surrogates, code points above U+10FFFF), \u escapes of lone
// surrogates (a high surrogate escape must be followed by a low one), nesting deeper than max_depth, and
// runs of more than max_whitespace_run whitespace bytes between tokens (a model stuck emitting newlines must
// be stopped). Every state that step() reaches can still be completed to a valid text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace tpserve::serve {

struct JsonValueState {
  uint64_t containers = 0;  // bit i: the container at depth i + 1 is an object (1) or an array (0)
  uint8_t depth = 0;        // open objects and arrays
  uint8_t mode = 0;         // where in the grammar the text is (a Mode, json_value_automaton.cc)
  uint8_t count = 0;        // literal bytes matched, \u hex digits left, or UTF-8 continuation bytes left
  uint8_t detail = 0;       // which literal, the first continuation byte's range, or the surrogate class
  uint8_t whitespace = 0;   // whitespace bytes in the current run between tokens
  uint8_t in_key = 0;       // the string being lexed is an object key (1) or a value (0)
  uint8_t unused[2] = {};   // always 0, so that the state has no indeterminate padding

  bool operator==(const JsonValueState&) const = default;
};
static_assert(sizeof(JsonValueState) == 16);
static_assert(std::is_trivially_copyable_v<JsonValueState> && std::is_standard_layout_v<JsonValueState>);

struct JsonValueStateHash {
  size_t operator()(const JsonValueState& s) const;
};

struct JsonValueOptions {
  bool top_level_object = true;     // the value must be an object (OpenAI's JSON mode); false: any JSON value
  int max_depth = 32;               // nesting of objects/arrays (0..64; >= 1 with top_level_object)
  int max_whitespace_run = 16;      // whitespace bytes in a row between tokens (0..255); no limit in strings
  bool trailing_whitespace = true;  // whitespace may follow the top-level value (false: the text ends there)
};

class JsonValueAutomaton {
 public:
  using State = JsonValueState;

  explicit JsonValueAutomaton(JsonValueOptions options = {});

  const JsonValueOptions& options() const { return options_; }
  State start() const { return State{}; }
  // Advances over one byte; returns false (leaving `s` unchanged) when the byte cannot continue any valid
  // JSON text from `s`.
  bool step(State& s, uint8_t byte) const;
  // The bytes so far are a complete JSON text: the top-level value closed (a top-level number may still
  // grow, but is complete as it stands), possibly followed by whitespace.
  bool accepting(const State& s) const;
  // The whole text is valid JSON under the options.
  bool matches(std::string_view text) const;

 private:
  bool step_structural(State& s, uint8_t byte) const;
  bool begin_value(State& s, uint8_t byte) const;
  bool push(State& s, bool object) const;

  JsonValueOptions options_;
};

}  // namespace tpserve::serve
