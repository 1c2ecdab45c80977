// EbnfAutomaton: an EBNF grammar (runtime/serve/ebnf_grammar.h) run one byte at a time, for structured
// output's token masks (runtime/serve/token_trie.h walks the vocabulary beside it).
//
// A parse position is a stack: the element to match next (always a byte range) and, below it, the places
// to return to when each open rule ends. Stacks are nodes (position, parent) in an arena, interned, so equal
// stacks are one id and a stack is shared by every state that holds it. A state is the sorted set of stack
// ids the text so far can be in (several where the grammar is ambiguous or a choice is still open), plus
// "accepted" where the root may end here. A byte keeps the stacks whose range holds it and moves each past
// it: the closure enters rules (a call keeps a return frame unless it is its alternative's last element) and
// leaves ended ones, down to the next byte ranges. Each stack's successors are computed once and kept, so a
// step is a merge of kept lists. The arena holds at most max_stacks nodes: past that a byte that needs a
// new stack is refused (documented in docs/serving.md; no grammar of ordinary nesting gets near it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/serve/ebnf_grammar.h"

namespace tpserve::serve {

struct EbnfState {
  std::vector<uint32_t> stacks;  // sorted ids; EbnfAutomaton::kAccepted last where present
  bool operator==(const EbnfState&) const = default;
};

struct EbnfStateHash {
  size_t operator()(const EbnfState& s) const;
};

class EbnfAutomaton {
 public:
  using State = EbnfState;
  using Hash = EbnfStateHash;
  static constexpr uint32_t kAccepted = UINT32_MAX;
  static constexpr size_t kDefaultMaxStacks = size_t(1) << 20;

  // Throws tpserve::Error where the grammar matches only the empty text.
  explicit EbnfAutomaton(const EbnfRules& rules, size_t max_stacks = kDefaultMaxStacks);

  State start() const { return start_; }
  // Advances over one byte; false (s unchanged) where no stack of s takes it.
  bool step(State& s, uint8_t byte);
  bool accepting(const State& s) const { return !s.stacks.empty() && s.stacks.back() == kAccepted; }
  // The whole text is in the grammar's language.
  bool matches(std::string_view text);
  size_t bytes() const;
  size_t num_stacks() const { return nodes_.size(); }

 private:
  // A flat position: an element of an alternative, or the end of one.
  struct Slot {
    enum Kind : uint8_t { kByte, kCall, kEnd } kind;
    uint8_t lo = 0, hi = 0;
    uint32_t rule = 0;
  };
  struct Node {
    uint32_t slot;    // kByte (a stack's top) or the slot to go on at when the callee ends
    uint32_t parent;  // kNoParent: the root's frame
  };
  static constexpr uint32_t kNoParent = UINT32_MAX, kRefused = UINT32_MAX - 1;

  uint32_t intern(uint32_t slot, uint32_t parent);
  // The stacks reached from each (slot, parent) seed without a byte, into out (unsorted).
  void closure(std::vector<std::pair<uint32_t, uint32_t>>& seeds, std::vector<uint32_t>& out);
  const std::vector<uint32_t>& successors(uint32_t stack);

  std::vector<Slot> slots_;
  std::vector<std::vector<uint32_t>> rule_starts_;  // by rule: the first slot of each alternative
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<std::vector<uint32_t>> successors_;  // by stack, once computed
  std::vector<bool> has_successors_;
  size_t max_stacks_;
  State start_;
  std::vector<std::pair<uint32_t, uint32_t>> seeds_;  // scratch
  std::vector<uint32_t> merged_;                      // scratch: a step's successors from several stacks
};

}  // namespace tpserve::serve
