// check_ebnf_rules (runtime/serve/ebnf_grammar.h): the properties the stack automaton relies on. Every rule
// it can enter can end (so every text it accepts a byte of can still be completed), and no call made before
// any byte can lead back to its own rule (so the closure over a state's stacks is finite).
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/error.h"
#include "runtime/serve/ebnf_grammar.h"

namespace tpserve::serve {
namespace {

// The rules for which "some alternative's every element holds" (bytes hold where bytes_hold), by a worklist:
// each alternative counts its rule elements not yet known to hold (linear in the grammar's size).
std::vector<bool> fixpoint(const EbnfRules& g, bool bytes_hold) {
  std::vector<bool> holds(g.rules.size(), false);
  struct Alt {
    uint32_t rule;
    size_t pending;
  };
  std::vector<Alt> alts;
  std::vector<std::vector<uint32_t>> used_by(g.rules.size());  // rule -> alternatives that use it
  std::vector<uint32_t> ready;
  for (size_t r = 0; r < g.rules.size(); ++r)
    for (const EbnfSequence& seq : g.rules[r].alternatives) {
      const uint32_t a = static_cast<uint32_t>(alts.size());
      alts.push_back({static_cast<uint32_t>(r), 0});
      bool blocked = false;
      for (const EbnfElement& e : seq) {
        if (!e.is_rule()) {
          blocked = blocked || !bytes_hold;
          continue;
        }
        ++alts[a].pending;
        used_by[e.rule].push_back(a);
      }
      if (blocked) alts[a].pending = SIZE_MAX;  // never holds
      if (alts[a].pending == 0) ready.push_back(static_cast<uint32_t>(r));
    }
  while (!ready.empty()) {
    const uint32_t r = ready.back();
    ready.pop_back();
    if (holds[r]) continue;
    holds[r] = true;
    for (uint32_t a : used_by[r])  // once per use: a rule used twice in an alternative counts twice
      if (alts[a].pending != SIZE_MAX && --alts[a].pending == 0) ready.push_back(alts[a].rule);
  }
  return holds;
}

struct Call {
  uint32_t to;
  bool last;  // the alternative's last element: the caller's frame is not kept
};

// Tarjan's strongly connected components, iteratively: component[r] for every rule.
std::vector<int> components(const std::vector<std::vector<Call>>& calls) {
  const int n = static_cast<int>(calls.size());
  std::vector<int> index(n, -1), low(n, 0), component(n, -1), stack;
  std::vector<bool> on_stack(n, false);
  std::vector<std::pair<int, size_t>> frames;  // (rule, next call to look at)
  int next_index = 0, next_component = 0;
  for (int start = 0; start < n; ++start) {
    if (index[start] >= 0) continue;
    frames.push_back({start, 0});
    index[start] = low[start] = next_index++;
    stack.push_back(start), on_stack[start] = true;
    while (!frames.empty()) {
      auto& [r, i] = frames.back();
      if (i < calls[r].size()) {
        const int to = static_cast<int>(calls[r][i++].to);
        if (index[to] < 0) {
          index[to] = low[to] = next_index++;
          stack.push_back(to), on_stack[to] = true;
          frames.push_back({to, 0});
        } else if (on_stack[to]) {
          low[r] = std::min(low[r], index[to]);
        }
        continue;
      }
      const int done = r;
      frames.pop_back();
      if (!frames.empty()) low[frames.back().first] = std::min(low[frames.back().first], low[done]);
      if (low[done] == index[done]) {
        int member;
        do {
          member = stack.back();
          stack.pop_back(), on_stack[member] = false;
          component[member] = next_component;
        } while (member != done);
        ++next_component;
      }
    }
  }
  return component;
}

}  // namespace

void check_ebnf_rules(const EbnfRules& g) {
  // Rules the root can reach.
  std::vector<bool> reachable(g.rules.size(), false);
  std::vector<uint32_t> todo{g.root};
  reachable[g.root] = true;
  while (!todo.empty()) {
    const uint32_t r = todo.back();
    todo.pop_back();
    for (const EbnfSequence& alt : g.rules[r].alternatives)
      for (const EbnfElement& e : alt)
        if (e.is_rule() && !reachable[e.rule]) reachable[e.rule] = true, todo.push_back(e.rule);
  }
  const std::vector<bool> productive = fixpoint(g, true);
  for (size_t r = 0; r < g.rules.size(); ++r)
    if (reachable[r] && !productive[r])
      throw Error("grammar: rule '" + g.rules[r].name +
                  "' can never end: each of its alternatives needs a rule that never ends (itself included)");
  // Calls made before any byte: an alternative's elements up to its first one that cannot be empty.
  const std::vector<bool> nullable = fixpoint(g, false);
  std::vector<std::vector<Call>> calls(g.rules.size());
  for (size_t r = 0; r < g.rules.size(); ++r)
    for (const EbnfSequence& alt : g.rules[r].alternatives)
      for (size_t i = 0; i < alt.size(); ++i) {
        if (!alt[i].is_rule()) break;
        calls[r].push_back({alt[i].rule, i + 1 == alt.size()});
        if (!nullable[alt[i].rule]) break;
      }
  // A call that keeps its caller's frame, inside a cycle of such calls: the stack grows without a byte.
  const std::vector<int> component = components(calls);
  for (size_t r = 0; r < g.rules.size(); ++r)
    for (const Call& c : calls[r])
      if (reachable[r] && !c.last && component[c.to] == component[r])
        throw Error("grammar: rule '" + g.rules[r].name + "' is left-recursive: it reaches '" +
                    g.rules[c.to].name +
                    "' and back before any text (write the repetition as x* or with the rule last)");
}

}  // namespace tpserve::serve
