#include "runtime/serve/ebnf_automaton.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "common/error.h"

namespace tpserve::serve {
namespace {

void sort_unique(std::vector<uint32_t>& ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
}

}  // namespace

size_t EbnfStateHash::operator()(const EbnfState& s) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the ids
  for (uint32_t id : s.stacks) h = (h ^ id) * 1099511628211ull;
  return static_cast<size_t>(h);
}

EbnfAutomaton::EbnfAutomaton(const EbnfRules& g, size_t max_stacks) : max_stacks_(max_stacks) {
  rule_starts_.resize(g.rules.size());
  for (size_t r = 0; r < g.rules.size(); ++r)
    for (const EbnfSequence& alt : g.rules[r].alternatives) {
      rule_starts_[r].push_back(static_cast<uint32_t>(slots_.size()));
      for (const EbnfElement& e : alt)
        slots_.push_back(e.is_rule() ? Slot{Slot::kCall, 0, 0, e.rule} : Slot{Slot::kByte, e.lo, e.hi, 0});
      slots_.push_back(Slot{Slot::kEnd});
    }
  seeds_.clear();
  for (uint32_t slot : rule_starts_[g.root]) seeds_.push_back({slot, kNoParent});
  closure(seeds_, start_.stacks);
  sort_unique(start_.stacks);
  if (start_.stacks.empty() || start_.stacks.front() == kAccepted)
    throw Error("grammar: matches only the empty text");
}

uint32_t EbnfAutomaton::intern(uint32_t slot, uint32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(slot) << 32) | parent;
  const auto it = node_ids_.find(key);
  if (it != node_ids_.end()) return it->second;
  if (nodes_.size() >= max_stacks_) return kRefused;
  const uint32_t id = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back({slot, parent});
  node_ids_.emplace(key, id);
  return id;
}

void EbnfAutomaton::closure(std::vector<std::pair<uint32_t, uint32_t>>& seeds, std::vector<uint32_t>& out) {
  std::unordered_set<uint64_t> seen;  // (slot, parent) pairs entered: nullable loops end here
  while (!seeds.empty()) {
    const auto [slot, parent] = seeds.back();
    seeds.pop_back();
    if (!seen.insert((static_cast<uint64_t>(slot) << 32) | parent).second) continue;
    const Slot& s = slots_[slot];
    if (s.kind == Slot::kByte) {
      const uint32_t id = intern(slot, parent);
      if (id != kRefused) out.push_back(id);
    } else if (s.kind == Slot::kEnd) {
      if (parent == kNoParent)
        out.push_back(kAccepted);
      else
        seeds.push_back({nodes_[parent].slot, nodes_[parent].parent});
    } else {
      // A call keeps a frame for what follows it, unless nothing does (the caller's own frame serves).
      uint32_t frame = parent;
      if (slots_[slot + 1].kind != Slot::kEnd) {
        frame = intern(slot + 1, parent);
        if (frame == kRefused) continue;
      }
      for (uint32_t start : rule_starts_[s.rule]) seeds.push_back({start, frame});
    }
  }
}

const std::vector<uint32_t>& EbnfAutomaton::successors(uint32_t stack) {
  if (stack >= has_successors_.size() || !has_successors_[stack]) {
    seeds_.clear();
    seeds_.push_back({nodes_[stack].slot + 1, nodes_[stack].parent});
    std::vector<uint32_t> out;
    closure(seeds_, out);
    sort_unique(out);
    if (nodes_.size() > successors_.size()) {
      successors_.resize(nodes_.size());
      has_successors_.resize(nodes_.size(), false);
    }
    successors_[stack] = std::move(out);
    has_successors_[stack] = true;
  }
  return successors_[stack];
}

bool EbnfAutomaton::step(State& s, uint8_t byte) {
  // Most states hold one stack that takes the byte: its kept successors are the next state, copied into
  // s's own buffer (no allocation once it is large enough; the vocabulary walk copies states a lot).
  const std::vector<uint32_t>* only = nullptr;
  int sources = 0;
  for (uint32_t id : s.stacks) {
    if (id == kAccepted) continue;
    const Slot& top = slots_[nodes_[id].slot];
    if (byte < top.lo || byte > top.hi) continue;
    if (sources == 1) merged_.assign(only->begin(), only->end());  // before successors() may move it
    const std::vector<uint32_t>& more = successors(id);
    if (sources == 0)
      only = &more;
    else
      merged_.insert(merged_.end(), more.begin(), more.end());
    ++sources;
  }
  if (sources == 0) return false;
  if (sources > 1) {
    sort_unique(merged_);
    only = &merged_;
  }
  if (only->empty()) return false;
  s.stacks.assign(only->begin(), only->end());
  return true;
}

bool EbnfAutomaton::matches(std::string_view text) {
  State s = start();
  for (char c : text)
    if (!step(s, static_cast<uint8_t>(c))) return false;
  return accepting(s);
}

size_t EbnfAutomaton::bytes() const {
  size_t kept = 0;
  for (const auto& list : successors_) kept += list.capacity() * sizeof(uint32_t) + sizeof(list);
  // The id map: about a key, a value and two pointers a node.
  return slots_.size() * sizeof(Slot) + nodes_.size() * (sizeof(Node) + 32) + kept;
}

}  // namespace tpserve::serve
