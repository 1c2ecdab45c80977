// EbnfAutomaton: an EBNF grammar (runtime/serve/ebnf_grammar.h) run one byte at a time, for structured
// output's token masks (runtime/serve/token_trie.h walks the vocabulary beside it).
//
// The parse is a graph-structured stack: a node is a grammar position (the byte range to match next, or the
// place to go on at when a called rule ends) with the set of nodes below it, so that the ways of reaching
// one position at one point of the text share one node, whatever called them (the expression grammar's
// `expr ::= term "+" expr | term` keeps a few nodes per level of nesting, not a product of alternatives).
// Nodes and parent sets are interned, so equal stacks are one id, shared by every state that holds them. A
// state is the sorted set of its top nodes (one per byte position; kAccepted last where the root may end
// here). A byte keeps the tops whose range holds it; the closure moves each past it, enters called rules
// (a call keeps a frame unless it is its alternative's last element) and leaves ended ones, down to the
// next byte ranges. Each top's successors are computed once and kept, shared where they depend only on the
// parents (the top ends its alternative).
//
// Budgets, so that no grammar can hang or exhaust the server (EbnfAutomatonLimits): tops a state, nodes,
// work a closure or step does, and ids kept. A start over one refuses the grammar; a byte whose step would
// exceed one is refused (the text cannot go on that way).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/serve/ebnf_grammar.h"

namespace tpserve::serve {

struct EbnfState {
  std::vector<uint32_t> stacks;  // sorted top node ids; EbnfAutomaton::kAccepted last where present
  bool operator==(const EbnfState&) const = default;
};

struct EbnfStateHash {
  size_t operator()(const EbnfState& s) const;
};

// The automaton's budgets (see above).
struct EbnfAutomatonLimits {
  size_t max_nodes = size_t(1) << 20;
  size_t max_state_stacks = 16384;            // at most one a byte position of the grammar
  size_t max_closure_work = size_t(1) << 20;  // parent entries a closure or a step's merge handles
  size_t max_entries = size_t(1) << 24;       // ids kept in parent sets and successor lists together
};

class EbnfAutomaton {
 public:
  using State = EbnfState;
  using Hash = EbnfStateHash;
  static constexpr uint32_t kAccepted = UINT32_MAX;
  using Limits = EbnfAutomatonLimits;

  // Throws tpserve::Error where the grammar matches only the empty text, or its start exceeds the budgets.
  explicit EbnfAutomaton(const EbnfRules& rules, Limits limits = {});

  State start() const { return start_; }
  // Advances over one byte; false (s unchanged) where no top of s takes it, or the budgets refuse it.
  bool step(State& s, uint8_t byte);
  bool accepting(const State& s) const { return !s.stacks.empty() && s.stacks.back() == kAccepted; }
  // The whole text is in the grammar's language.
  bool matches(std::string_view text);
  size_t bytes() const;
  size_t num_nodes() const { return nodes_.size(); }

 private:
  // A flat position: an element of an alternative, or the end of one.
  struct Slot {
    enum Kind : uint8_t { kByte, kCall, kEnd } kind;
    uint8_t lo = 0, hi = 0;
    uint32_t rule = 0;
  };
  struct Node {
    uint32_t slot;     // kByte (a top) or the slot to go on at when the callee ends
    uint32_t parents;  // an interned set of node ids (kNoParent in it: the root's frame)
  };
  // Parent entries during a closure: a node id, kNoParent, or kLocal | slot: the frame of a call made at
  // this point of the text, going on at `slot` with the parents the call's own slot has here.
  static constexpr uint32_t kNoParent = 0x7FFFFFFFu, kLocal = 0x80000000u, kRefused = UINT32_MAX;

  uint32_t intern_node(uint32_t slot, uint32_t parents);
  uint32_t intern_set(std::vector<uint32_t> ids);  // ids sorted and unique
  enum class Refusal { kNone, kTops, kNodes, kDepth, kWork, kEntries };
  // The tops reached from (slot, parent set) seeds without a byte, sorted, kAccepted last; or the budget
  // that refuses them.
  Refusal closure(const std::vector<std::pair<uint32_t, uint32_t>>& seeds, std::vector<uint32_t>& out);
  // The index in lists_ of a top's successors over a byte it takes.
  uint32_t successors(uint32_t top);

  struct IdsHash {
    size_t operator()(const std::vector<uint32_t>& ids) const;
  };
  Limits limits_;
  std::vector<Slot> slots_;
  std::vector<std::vector<uint32_t>> rule_starts_;  // by rule: the first slot of each alternative
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<std::vector<uint32_t>> sets_;
  std::unordered_map<std::vector<uint32_t>, uint32_t, IdsHash> set_ids_;
  std::vector<std::vector<uint32_t>> lists_;            // successor lists
  std::vector<bool> list_refused_;                      // by list: a budget refused it (so is the byte)
  size_t entries_ = 0;                                  // ids in sets_ and lists_
  std::vector<uint32_t> list_of_top_;                   // by node: index + 1 into lists_ (0: not yet)
  std::unordered_map<uint32_t, uint32_t> list_of_pop_;  // by parent set: the list of a top that ends its
                                                        // alternative there
  State start_;
  std::vector<uint32_t> sources_, merged_;  // scratch
};

}  // namespace tpserve::serve
