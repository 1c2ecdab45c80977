#include "runtime/serve/ebnf_automaton.h"

#include <algorithm>
#include <unordered_set>

#include "common/error.h"

namespace tpserve::serve {
namespace {

void sort_unique(std::vector<uint32_t>& ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
}

uint64_t fnv(const std::vector<uint32_t>& ids) {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t id : ids) h = (h ^ id) * 1099511628211ull;
  return h;
}

// Deepest chain of calls made at one point of the text that a closure materializes (grammar-bounded).
constexpr int kMaxFrameDepth = 4096;

}  // namespace

size_t EbnfStateHash::operator()(const EbnfState& s) const {
  return static_cast<size_t>(fnv(s.stacks));
}
size_t EbnfAutomaton::IdsHash::operator()(const std::vector<uint32_t>& ids) const {
  return static_cast<size_t>(fnv(ids));
}

EbnfAutomaton::EbnfAutomaton(const EbnfRules& g, Limits limits) : limits_(limits) {
  rule_starts_.resize(g.rules.size());
  for (size_t r = 0; r < g.rules.size(); ++r)
    for (const EbnfSequence& alt : g.rules[r].alternatives) {
      rule_starts_[r].push_back(static_cast<uint32_t>(slots_.size()));
      for (const EbnfElement& e : alt)
        slots_.push_back(e.is_rule() ? Slot{Slot::kCall, 0, 0, e.rule} : Slot{Slot::kByte, e.lo, e.hi, 0});
      slots_.push_back(Slot{Slot::kEnd});
    }
  const uint32_t root_frame = intern_set({kNoParent});
  std::vector<std::pair<uint32_t, uint32_t>> seeds;
  for (uint32_t slot : rule_starts_[g.root]) seeds.push_back({slot, root_frame});
  switch (closure(seeds, start_.stacks)) {
    case Refusal::kNone:
      break;
    case Refusal::kTops:
      throw Error("grammar: too ambiguous: its start has more than " +
                  std::to_string(limits_.max_state_stacks) + " ways to go on");
    case Refusal::kDepth:
      throw Error("grammar: its start nests calls more than " + std::to_string(kMaxFrameDepth) +
                  " deep before any text");
    default:
      throw Error("grammar: too large to start within the automaton's budgets");
  }
  if (start_.stacks.empty() || start_.stacks.front() == kAccepted)
    throw Error("grammar: matches only the empty text");
}

uint32_t EbnfAutomaton::intern_node(uint32_t slot, uint32_t parents) {
  const uint64_t key = (static_cast<uint64_t>(slot) << 32) | parents;
  const auto it = node_ids_.find(key);
  if (it != node_ids_.end()) return it->second;
  if (nodes_.size() >= limits_.max_nodes) return kRefused;
  const uint32_t id = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back({slot, parents});
  node_ids_.emplace(key, id);
  return id;
}

uint32_t EbnfAutomaton::intern_set(std::vector<uint32_t> ids) {
  const auto it = set_ids_.find(ids);
  if (it != set_ids_.end()) return it->second;
  if (entries_ + ids.size() > limits_.max_entries) return kRefused;
  entries_ += ids.size();
  const uint32_t id = static_cast<uint32_t>(sets_.size());
  sets_.push_back(ids);
  set_ids_.emplace(std::move(ids), id);
  return id;
}

EbnfAutomaton::Refusal EbnfAutomaton::closure(const std::vector<std::pair<uint32_t, uint32_t>>& seeds,
                                              std::vector<uint32_t>& out) {
  // The parent entries reaching each slot at this point of the text (one graph node each, once interned).
  std::unordered_map<uint32_t, std::vector<uint32_t>> local;
  std::unordered_set<uint32_t> popped;   // call slots whose callee ended here, without a byte
  std::unordered_set<uint64_t> entered;  // (slot, parent entry) pairs added
  std::vector<std::pair<uint32_t, uint32_t>> work;
  bool accepted = false;
  auto add = [&](uint32_t slot, uint32_t parent) {
    if (!entered.insert((static_cast<uint64_t>(slot) << 32) | parent).second) return;
    local[slot].push_back(parent);
    work.push_back({slot, parent});
  };
  for (const auto& [slot, set] : seeds)
    for (uint32_t parent : sets_[set]) add(slot, parent);
  while (!work.empty()) {
    if (entered.size() > limits_.max_closure_work) return Refusal::kWork;
    const auto [slot, parent] = work.back();
    work.pop_back();
    const Slot s = slots_[slot];
    if (s.kind == Slot::kByte) continue;
    if (s.kind == Slot::kEnd) {
      if (parent == kNoParent) {
        accepted = true;
      } else if (parent & kLocal) {  // a call made here ended here: go on after it with the call's parents
        const uint32_t next = parent & ~kLocal;
        popped.insert(next - 1);
        const std::vector<uint32_t> callers = local[next - 1];  // a copy: add() may grow the map
        for (uint32_t q : callers) add(next, q);
      } else {
        const Node n = nodes_[parent];
        for (uint32_t q : sets_[n.parents]) add(n.slot, q);
      }
      continue;
    }
    // A call: its alternatives start with this frame (or, last in its alternative, with the caller's).
    if (slots_[slot + 1].kind == Slot::kEnd) {
      for (uint32_t start : rule_starts_[s.rule]) add(start, parent);
      continue;
    }
    for (uint32_t start : rule_starts_[s.rule]) add(start, kLocal | (slot + 1));
    if (popped.count(slot)) add(slot + 1, parent);  // the callee already ended here: a new caller goes on
  }
  // Interned: each slot's entries as a parent set, local frames as nodes (a call chain's frames in order).
  std::unordered_map<uint32_t, uint32_t> frames;  // continuation slot -> node
  Refusal refused = Refusal::kNone;
  int depth = 0;
  auto materialize = [&](auto& self, uint32_t slot) -> uint32_t {
    std::vector<uint32_t> ids;
    for (uint32_t p : local[slot]) {
      if (p == kNoParent || !(p & kLocal)) {
        ids.push_back(p);
        continue;
      }
      const uint32_t next = p & ~kLocal;
      auto it = frames.find(next);
      if (it == frames.end()) {
        if (++depth > kMaxFrameDepth) {
          refused = Refusal::kDepth;
          return 0;
        }
        const uint32_t set = self(self, next - 1);
        --depth;
        if (refused != Refusal::kNone) return 0;
        const uint32_t node = intern_node(next, set);
        if (node == kRefused) {
          refused = Refusal::kNodes;
          return 0;
        }
        it = frames.emplace(next, node).first;
      }
      ids.push_back(it->second);
    }
    sort_unique(ids);
    const uint32_t set = intern_set(std::move(ids));
    if (set == kRefused) refused = Refusal::kEntries;
    return set;
  };
  std::vector<uint32_t> byte_slots;  // collected first: materialize() reads the map
  for (const auto& entry : local)
    if (slots_[entry.first].kind == Slot::kByte) byte_slots.push_back(entry.first);
  if (byte_slots.size() > limits_.max_state_stacks) return Refusal::kTops;
  out.clear();
  for (uint32_t slot : byte_slots) {
    const uint32_t set = materialize(materialize, slot);
    if (refused != Refusal::kNone) return refused;
    const uint32_t top = intern_node(slot, set);
    if (top == kRefused) return Refusal::kNodes;
    out.push_back(top);
  }
  if (accepted) out.push_back(kAccepted);
  sort_unique(out);
  return out.size() <= limits_.max_state_stacks ? Refusal::kNone : Refusal::kTops;
}

uint32_t EbnfAutomaton::successors(uint32_t top) {
  if (top < list_of_top_.size() && list_of_top_[top] != 0) return list_of_top_[top] - 1;
  const Node n = nodes_[top];
  // A top that ends its alternative goes on where its parents say: shared by every such top with them.
  const bool ends = slots_[n.slot + 1].kind == Slot::kEnd;
  uint32_t list;
  if (const auto it = list_of_pop_.find(n.parents); ends && it != list_of_pop_.end()) {
    list = it->second;
  } else {
    std::vector<uint32_t> next;
    bool refused = closure({{n.slot + 1, n.parents}}, next) != Refusal::kNone;  // the byte is refused
    if (refused || entries_ + next.size() > limits_.max_entries) {
      refused = true;
      next.clear();
    }
    entries_ += next.size();
    list = static_cast<uint32_t>(lists_.size());
    lists_.push_back(std::move(next));
    list_refused_.push_back(refused);
    if (ends) list_of_pop_.emplace(n.parents, list);
  }
  if (nodes_.size() > list_of_top_.size()) list_of_top_.resize(nodes_.size(), 0);
  list_of_top_[top] = list + 1;
  return list;
}

bool EbnfAutomaton::step(State& s, uint8_t byte) {
  // The distinct successor lists of the tops that take the byte.
  std::vector<uint32_t>& lists = sources_;
  lists.clear();
  for (uint32_t id : s.stacks) {
    if (id == kAccepted) continue;
    const Slot& top = slots_[nodes_[id].slot];
    if (byte < top.lo || byte > top.hi) continue;
    const uint32_t list = successors(id);
    if (list_refused_[list]) return false;  // a way the text could go on exceeds a budget
    lists.push_back(list);
  }
  sort_unique(lists);
  if (lists.empty()) return false;
  if (lists.size() == 1) {  // most steps: the kept list is the next state
    if (lists_[lists[0]].empty()) return false;
    s.stacks.assign(lists_[lists[0]].begin(), lists_[lists[0]].end());
    return true;
  }
  merged_.clear();
  for (uint32_t list : lists) {
    if (merged_.size() + lists_[list].size() > limits_.max_closure_work) return false;
    merged_.insert(merged_.end(), lists_[list].begin(), lists_[list].end());
  }
  sort_unique(merged_);
  // Tops of one slot from several sources: one node with their parents together.
  std::vector<std::pair<uint32_t, uint32_t>> by_slot;  // (slot, node)
  for (uint32_t id : merged_)
    if (id != kAccepted) by_slot.push_back({nodes_[id].slot, id});
  std::sort(by_slot.begin(), by_slot.end());
  std::vector<uint32_t> next;
  for (size_t i = 0; i < by_slot.size();) {
    size_t j = i + 1;
    while (j < by_slot.size() && by_slot[j].first == by_slot[i].first) ++j;
    if (j == i + 1) {
      next.push_back(by_slot[i].second);
    } else {
      std::vector<uint32_t> parents;
      for (size_t k = i; k < j; ++k) {
        const std::vector<uint32_t>& set = sets_[nodes_[by_slot[k].second].parents];
        parents.insert(parents.end(), set.begin(), set.end());
      }
      sort_unique(parents);
      if (parents.size() > limits_.max_closure_work) return false;
      const uint32_t set = intern_set(std::move(parents));
      if (set == kRefused) return false;
      const uint32_t node = intern_node(by_slot[i].first, set);
      if (node == kRefused) return false;
      next.push_back(node);
    }
    i = j;
  }
  if (!merged_.empty() && merged_.back() == kAccepted) next.push_back(kAccepted);
  sort_unique(next);
  if (next.empty() || next.size() > limits_.max_state_stacks) return false;
  s.stacks = std::move(next);
  return true;
}

bool EbnfAutomaton::matches(std::string_view text) {
  State s = start();
  for (char c : text)
    if (!step(s, static_cast<uint8_t>(c))) return false;
  return accepting(s);
}

size_t EbnfAutomaton::bytes() const {
  // Each node and set also costs a map entry: about a key, a value and two pointers. entries_: the ids held.
  return slots_.size() * sizeof(Slot) + nodes_.size() * (sizeof(Node) + 32) + sets_.size() * 64 +
         entries_ * 2 * sizeof(uint32_t) + list_of_top_.size() * sizeof(uint32_t);
}

}  // namespace tpserve::serve
