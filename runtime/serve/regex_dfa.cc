#include "runtime/serve/regex_dfa.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace tpserve::serve {

using Kind = NfaState::Kind;

void check_regex(std::string_view pattern) {
  compile_nfa(parse_regex(pattern), RegexDfa::kMaxNfaStates);
}

RegexDfa::RegexDfa(std::string_view pattern, size_t max_states)
    : nfa_(compile_nfa(parse_regex(pattern), kMaxNfaStates)), max_states_(max_states) {
  // Byte classes: a new class starts at every byte where some edge's range starts or ends.
  std::array<bool, 257> boundary{};
  for (const NfaState& s : nfa_.states) {
    if (s.kind != Kind::kByte) continue;
    boundary[s.lo] = true;
    boundary[s.hi + 1] = true;
  }
  for (int b = 0; b < 256; ++b) {
    if (b == 0 || boundary[b]) class_byte_.push_back(static_cast<uint8_t>(b));
    class_of_[b] = static_cast<uint8_t>(class_byte_.size() - 1);
  }
  visited_.assign(nfa_.states.size(), 0);
  start_ = state_of(closure({nfa_.start}));
}

size_t RegexDfa::SetHash::operator()(const std::vector<int32_t>& set) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the state ids
  for (int32_t s : set) h = (h ^ static_cast<uint32_t>(s)) * 1099511628211ull;
  return static_cast<size_t>(h);
}

std::vector<int32_t> RegexDfa::closure(const std::vector<int32_t>& seeds) {
  if (++mark_ == 0) {  // the marks wrapped around: clear them
    std::fill(visited_.begin(), visited_.end(), 0);
    mark_ = 1;
  }
  std::vector<int32_t> out, stack;
  for (int32_t s : seeds) {
    // A state that cannot reach the match leads only to such states: leave them all out.
    if (s >= 0 && nfa_.live[s] && visited_[s] != mark_) visited_[s] = mark_, stack.push_back(s);
  }
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    const NfaState& state = nfa_.states[s];
    ++work_;
    if (state.kind != Kind::kEpsilon) {
      out.push_back(s);
      continue;
    }
    for (int32_t to : {state.out, state.out1}) {
      if (to >= 0 && nfa_.live[to] && visited_[to] != mark_) visited_[to] = mark_, stack.push_back(to);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

int32_t RegexDfa::state_of(std::vector<int32_t> set) {
  if (set.empty()) return kDead;
  auto found = ids_.find(set);
  if (found != ids_.end()) return found->second;
  if (sets_.size() >= max_states_) {
    throw Error("regex: the pattern needs more than " + std::to_string(max_states_) +
                " automaton states (simplify it or bound its repetitions)");
  }
  set_entries_ += set.size();
  if (set_entries_ > kMaxSetEntries || (sets_.size() + 1) * class_byte_.size() > kMaxTableEntries) {
    throw Error("regex: the pattern's automaton is too large to build (" + std::to_string(sets_.size()) +
                " states of " + std::to_string(set_entries_) +
                " pattern positions so far; simplify it or bound its repetitions)");
  }
  const auto id = static_cast<int32_t>(sets_.size());
  const bool accepts = std::binary_search(set.begin(), set.end(), nfa_.match);
  auto [it, inserted] = ids_.emplace(std::move(set), id);
  sets_.push_back(&it->first);
  accepting_.push_back(accepts ? 1 : 0);
  table_.resize(table_.size() + class_byte_.size(), kUnknown);
  return id;
}

int32_t RegexDfa::compute(int32_t state, uint8_t byte) {
  if (built_) throw Error("regex: internal error: a transition missing after build_all()");
  const uint8_t cls = class_of_[byte];
  const uint8_t b = class_byte_[cls];  // every byte of the class moves alike
  work_ += sets_[state]->size();
  if (work_ > kMaxBuildWork) {
    throw Error("regex: the pattern's automaton is too large to build (more than " +
                std::to_string(kMaxBuildWork) + " steps; simplify it or bound its repetitions)");
  }
  std::vector<int32_t> seeds;
  for (int32_t s : *sets_[state]) {
    const NfaState& n = nfa_.states[s];
    if (n.kind == Kind::kByte && n.lo <= b && b <= n.hi) seeds.push_back(n.out);
  }
  const int32_t to = state_of(closure(seeds));
  table_[static_cast<size_t>(state) * class_byte_.size() + cls] = to;
  return to;
}

void RegexDfa::build_all() {
  if (built_) return;
  // States are numbered as made: walking ids in order reaches every state made on the way.
  for (size_t state = 0; state < sets_.size(); ++state)  // the start is state 0; states are made in order
    for (const uint8_t byte : class_byte_) next(static_cast<int32_t>(state), byte);
  built_ = true;
  ids_ = decltype(ids_)();
  std::vector<const std::vector<int32_t>*>().swap(sets_);
  nfa_ = Nfa{};
  std::vector<uint32_t>().swap(visited_);
  table_.shrink_to_fit();
  accepting_.shrink_to_fit();
}

size_t RegexDfa::bytes() const {
  size_t set_bytes = 0;
  for (const auto* set : sets_) set_bytes += set->size() * sizeof(int32_t) + 64;
  return table_.capacity() * sizeof(int32_t) + accepting_.capacity() + set_bytes +
         nfa_.states.capacity() * sizeof(NfaState) + visited_.capacity() * sizeof(uint32_t);
}

bool RegexDfa::matches(std::string_view text) {
  int32_t state = start_;
  for (char c : text) {
    state = next(state, static_cast<uint8_t>(c));
    if (state == kDead) return false;
  }
  return accepting(state);
}

}  // namespace tpserve::serve
