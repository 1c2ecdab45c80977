#include "runtime/serve/regex_nfa.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "common/error.h"
#include "runtime/serve/utf8_ranges.h"

namespace tpserve::serve {
namespace {

using Kind = NfaState::Kind;

// Compiles backwards: compile(node, next) returns the entry state of node's fragment, whose exits lead to
// next. No patch lists are needed and the optional tail of x{n,m} nests as (x(x(x)?)?)?, so that every
// exit jumps straight to next.
class Builder {
 public:
  explicit Builder(size_t max_states) : max_states_(max_states) {}

  Nfa build(const RegexNode& root) {
    nfa_.match = add({Kind::kMatch});
    nfa_.start = compile(root, nfa_.match);
    mark_live();
    return std::move(nfa_);
  }

 private:
  size_t max_states_;
  Nfa nfa_;

  int32_t add(NfaState state) {
    if (nfa_.states.size() >= max_states_) {
      throw Error("regex: the pattern is too large (its automaton would need more than " +
                  std::to_string(max_states_) + " states)");
    }
    nfa_.states.push_back(state);
    return static_cast<int32_t>(nfa_.states.size() - 1);
  }

  int32_t split(int32_t a, int32_t b) { return add({Kind::kEpsilon, 0, 0, a, b}); }

  int32_t compile(const RegexNode& node, int32_t next) {
    switch (node.kind) {
      case RegexNode::Kind::kEmpty:
        return next;
      case RegexNode::Kind::kSet:
        return compile_set(node.set, next);
      case RegexNode::Kind::kConcat:
        for (auto it = node.children.rbegin(); it != node.children.rend(); ++it) next = compile(*it, next);
        return next;
      case RegexNode::Kind::kAlternate: {
        int32_t entry = -1;
        for (auto it = node.children.rbegin(); it != node.children.rend(); ++it) {
          const int32_t alternative = compile(*it, next);
          entry = entry < 0 ? alternative : split(alternative, entry);
        }
        return entry;
      }
      case RegexNode::Kind::kRepeat:
        return compile_repeat(node, next);
    }
    return next;
  }

  // Chains of byte ranges, one per UTF-8 sequence; chains ending alike share their tails.
  int32_t compile_set(const std::vector<CodePointRange>& set, int32_t next) {
    std::map<std::tuple<uint8_t, uint8_t, int32_t>, int32_t> made;
    int32_t entry = -1;
    for (auto range = set.rbegin(); range != set.rend(); ++range) {
      std::vector<Utf8Sequence> sequences = utf8_sequences(range->lo, range->hi);
      for (auto seq = sequences.rbegin(); seq != sequences.rend(); ++seq) {
        int32_t state = next;
        for (auto byte = seq->rbegin(); byte != seq->rend(); ++byte) {
          auto [it, fresh] = made.try_emplace({byte->lo, byte->hi, state}, -1);
          if (fresh) it->second = add({Kind::kByte, byte->lo, byte->hi, state});
          state = it->second;
        }
        entry = entry < 0 ? state : split(state, entry);
      }
    }
    return entry >= 0 ? entry : add({Kind::kEpsilon});  // an empty set: a state that leads nowhere
  }

  int32_t compile_repeat(const RegexNode& node, int32_t next) {
    const RegexNode& body = node.children[0];
    const size_t copies = node.max < 0 ? std::max(node.min, 1) : std::max(node.max, 1);
    bool checked = false;
    // Compiles one copy of the body; after the first, refuses a repetition whose copies cannot fit.
    auto copy = [&](int32_t to) {
      const size_t before = nfa_.states.size();
      const int32_t entry = compile(body, to);
      if (!checked) {
        checked = true;
        const size_t each = std::max<size_t>(nfa_.states.size() - before, 1);
        if (nfa_.states.size() + each * (copies - 1) > max_states_) {
          throw Error("regex: repetition '" + node.quantifier + "' at offset " + std::to_string(node.offset) +
                      " is too large (its automaton would need more than " + std::to_string(max_states_) +
                      " states)");
        }
      }
      return entry;
    };
    int32_t entry = next;
    int mandatory = node.min;
    if (node.max < 0) {
      // x{n,}: n-1 copies, then x+ as a loop (x* when n is 0).
      const int32_t loop = split(-1, next);
      const int32_t first = copy(loop);
      nfa_.states[loop].out = first;
      entry = node.min == 0 ? loop : first;
      mandatory = std::max(node.min - 1, 0);
    } else {
      for (int i = node.min; i < node.max; ++i) entry = split(copy(entry), next);
    }
    for (int i = 0; i < mandatory; ++i) entry = copy(entry);
    return entry;
  }

  // Reverse reachability from the match state.
  void mark_live() {
    const size_t n = nfa_.states.size();
    std::vector<std::vector<int32_t>> from(n);
    for (size_t s = 0; s < n; ++s) {
      for (int32_t to : {nfa_.states[s].out, nfa_.states[s].out1}) {
        if (to >= 0) from[to].push_back(static_cast<int32_t>(s));
      }
    }
    nfa_.live.assign(n, 0);
    std::vector<int32_t> stack = {nfa_.match};
    nfa_.live[nfa_.match] = 1;
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      for (int32_t p : from[s]) {
        if (!nfa_.live[p]) nfa_.live[p] = 1, stack.push_back(p);
      }
    }
  }
};

}  // namespace

Nfa compile_nfa(const RegexNode& root, size_t max_states) {
  return Builder(max_states).build(root);
}

}  // namespace tpserve::serve
