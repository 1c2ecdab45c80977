// RegexDfa: a regular expression as a deterministic automaton over UTF-8 bytes, for structured output
// (guided_regex, guided_json): the sampler asks, state by state, which vocabulary tokens may come next.
//
// The pattern (syntax: runtime/serve/regex_parser.h) matches the whole text. It is compiled to a Thompson
// NFA; DFA states are made by subset construction when first reached, and each transition is cached in a
// per-state row indexed by byte class (bytes that no NFA edge tells apart share a class), so a cached next()
// is two array reads. A state from which no match can be completed is never made: it is kDead, so every
// other state can still reach an accepting one. Not thread-safe (next() fills the cache).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/serve/regex_nfa.h"

namespace tpserve::serve {

// Throws what RegexDfa's constructor would for `pattern` (syntax, unsupported constructs, an NFA too large),
// without building anything more.
void check_regex(std::string_view pattern);

class RegexDfa {
 public:
  static constexpr int32_t kDead = -1;
  // Bounds the NFA (unrolled counted repetitions): a larger pattern is refused by the constructor.
  static constexpr size_t kMaxNfaStates = size_t(1) << 20;
  // Bounds what building the DFA holds and does: the NFA states of all DFA states together (a short
  // pattern such as (?:.?){0,5000} has few DFA states of thousands of NFA states each), and the transition
  // table (states x byte classes).
  static constexpr size_t kMaxSetEntries = 4u << 20;
  static constexpr size_t kMaxTableEntries = 8u << 20;
  // Bounds the work of building: pattern positions scanned and visited, over all transitions computed (a
  // short pattern of many byte classes over large sets costs seconds otherwise).
  static constexpr size_t kMaxBuildWork = size_t(200) << 20;

  // Throws tpserve::Error for syntax errors and unsupported constructs ("regex: ... at offset N"). A pattern
  // whose DFA needs more than max_states states throws from next() when the limit is crossed.
  explicit RegexDfa(std::string_view pattern, size_t max_states = 100000);

  // kDead when the pattern matches nothing.
  int32_t start() const { return start_; }

  // The state after `byte`; kDead when no match can continue (also from kDead).
  int32_t next(int32_t state, uint8_t byte) {
    if (state < 0) return kDead;
    const int32_t to = table_[static_cast<size_t>(state) * class_byte_.size() + class_of_[byte]];
    return to != kUnknown ? to : compute(state, byte);
  }

  // The bytes so far are a whole match.
  bool accepting(int32_t state) const { return state >= 0 && accepting_[state] != 0; }

  bool matches(std::string_view text);

  // Builds every state and transition reachable from the start now (throwing as next() would), then lets
  // go of what building needed (the NFA, the state sets): next() is from then on a table lookup that never
  // throws, and the automaton holds only its table.
  void build_all();

  size_t num_states() const { return accepting_.size(); }
  // Bytes the automaton holds (after build_all(): its table).
  size_t bytes() const;
  size_t num_byte_classes() const { return class_byte_.size(); }

 private:
  static constexpr int32_t kUnknown = -2;  // a transition not computed yet

  struct SetHash {
    size_t operator()(const std::vector<int32_t>& set) const;
  };

  int32_t compute(int32_t state, uint8_t byte);
  // The live byte-consuming and match states reachable from seeds by epsilon moves, sorted.
  std::vector<int32_t> closure(const std::vector<int32_t>& seeds);
  // The DFA state of an NFA state set, made when new; kDead for the empty set.
  int32_t state_of(std::vector<int32_t> set);

  Nfa nfa_;
  size_t max_states_;
  std::array<uint8_t, 256> class_of_{};
  std::vector<uint8_t> class_byte_;  // a byte of each class
  std::vector<int32_t> table_;       // [num_states, num_classes]: next state, kDead or kUnknown
  std::vector<uint8_t> accepting_;
  std::unordered_map<std::vector<int32_t>, int32_t, SetHash> ids_;
  std::vector<const std::vector<int32_t>*> sets_;  // the NFA states of each DFA state (keys of ids_)
  std::vector<uint32_t> visited_;                  // closure's marks: visited_[s] == mark_
  uint32_t mark_ = 0;
  int32_t start_ = kDead;
  size_t set_entries_ = 0;  // NFA states of all DFA states
  size_t work_ = 0;         // NFA states scanned and visited by compute()
  bool built_ = false;      // build_all() ran: nothing left to compute
};

}  // namespace tpserve::serve
