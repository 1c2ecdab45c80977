#include "runtime/serve/structured_grammar.h"

#include <algorithm>
#include <list>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/error.h"
#include "runtime/serve/ebnf_automaton.h"
#include "runtime/serve/regex_dfa.h"

namespace tpserve::serve {
namespace {

// RegexDfa under the interface TokenTrie walks (State, step that refuses with false).
class RegexAutomaton {
 public:
  using State = int32_t;
  using Hash = std::hash<int32_t>;
  RegexAutomaton(std::string_view pattern, size_t max_states) : dfa_(pattern, max_states) {
    if (dfa_.start() == RegexDfa::kDead) throw Error("regex: matches no text at all");
    // Every state and transition now: a rule too large fails here, at the request, not in a step.
    dfa_.build_all();
    // The output has at least one token, and a rule's tokens are never special ones.
    bool continues = false;
    for (int b = 0; b < 256 && !continues; ++b)
      continues = dfa_.next(dfa_.start(), static_cast<uint8_t>(b)) != RegexDfa::kDead;
    if (!continues) throw Error("regex: matches only the empty text");
  }
  size_t bytes() const { return dfa_.bytes(); }
  State start() const { return dfa_.start(); }
  bool step(State& s, uint8_t byte) {
    const State n = dfa_.next(s, byte);
    if (n == RegexDfa::kDead) return false;
    s = n;
    return true;
  }
  bool accepting(State s) const { return dfa_.accepting(s); }

 private:
  RegexDfa dfa_;
};

// JsonValueAutomaton under the same interface.
class JsonAutomaton {
 public:
  using State = JsonValueState;
  using Hash = JsonValueStateHash;
  explicit JsonAutomaton(const JsonValueOptions& options) : json_(options) {}
  State start() const { return json_.start(); }
  bool step(State& s, uint8_t byte) { return json_.step(s, byte); }
  bool accepting(const State& s) const { return json_.accepting(s); }
  size_t bytes() const { return sizeof(*this); }

 private:
  JsonValueAutomaton json_;
};

// Bytes a memoized state holds: its size, and an EBNF state's list of tops.
template <class State>
size_t state_bytes(const State&) {
  return sizeof(State);
}
size_t state_bytes(const EbnfState& s) {
  return sizeof(EbnfState) + s.stacks.size() * sizeof(uint32_t);
}

// Masks kept per grammar (19 KB each over Qwen3's vocabulary); past this many, the least recently used goes.
constexpr size_t kMaxMemoizedMasks = 512;

template <class Automaton>
class AutomatonGrammar : public StructuredGrammar,
                         public std::enable_shared_from_this<AutomatonGrammar<Automaton>> {
 public:
  using State = typename Automaton::State;
  AutomatonGrammar(Automaton automaton, std::shared_ptr<const TokenTrie> vocabulary)
      : automaton_(std::move(automaton)), vocabulary_(std::move(vocabulary)) {}

  std::shared_ptr<TokenConstraint> start(std::optional<int32_t> begin_after) override;

  State initial() {
    std::lock_guard<std::mutex> lock(mutex_);
    return automaton_.start();
  }
  void allowed(const State& s, uint32_t* words, int num_words) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = masks_.find(s);
    if (it != masks_.end()) {
      recent_.splice(recent_.begin(), recent_, it->second);
    } else {
      if (recent_.size() >= kMaxMemoizedMasks) {
        masks_.erase(recent_.back().first);
        recent_.pop_back();
      }
      std::vector<uint32_t> mask(static_cast<size_t>(vocabulary_->vocab_size() + 31) / 32, 0u);
      vocabulary_->allowed_tokens(automaton_, s, mask.data(), static_cast<int>(mask.size()));
      recent_.emplace_front(s, std::move(mask));
      it = masks_.emplace(s, recent_.begin()).first;
    }
    const std::vector<uint32_t>& mask = it->second->second;
    const size_t n = std::min(mask.size(), static_cast<size_t>(num_words));
    for (size_t i = 0; i < n; ++i) words[i] |= mask[i];
  }
  size_t bytes() override {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t masks = 0;
    for (const auto& entry : recent_)  // the mask, and its state twice (the list's and the map's key)
      masks += entry.second.size() * sizeof(uint32_t) + 2 * state_bytes(entry.first);
    return automaton_.bytes() + masks;
  }
  bool accepting(const State& s) {
    std::lock_guard<std::mutex> lock(mutex_);
    return automaton_.accepting(s);
  }
  // Accepting, and no byte may follow.
  bool finished(const State& s) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!automaton_.accepting(s)) return false;
    for (int b = 0; b < 256; ++b) {
      State next = s;
      if (automaton_.step(next, static_cast<uint8_t>(b))) return false;
    }
    return true;
  }
  // Advances over a token's bytes; false (s unchanged) if the rule refuses any of them.
  bool advance(State& s, int32_t token) {
    const std::string& bytes = vocabulary_->bytes(token);
    if (bytes.empty()) return false;  // special tokens (and ids without bytes) are never allowed
    std::lock_guard<std::mutex> lock(mutex_);
    State next = s;
    for (char c : bytes)
      if (!automaton_.step(next, static_cast<uint8_t>(c))) return false;
    s = next;
    return true;
  }

 private:
  std::mutex mutex_;  // requests' constraints are used on the engine's thread, start() on the server's
  Automaton automaton_;
  std::shared_ptr<const TokenTrie> vocabulary_;
  std::list<std::pair<State, std::vector<uint32_t>>> recent_;  // memoized masks, most recently used first
  std::unordered_map<State, typename decltype(recent_)::iterator, typename Automaton::Hash> masks_;
};

// One request's place in its grammar.
template <class Automaton>
class AutomatonConstraint : public TokenConstraint {
 public:
  using Grammar = AutomatonGrammar<Automaton>;
  AutomatonConstraint(std::shared_ptr<Grammar> grammar, std::optional<int32_t> begin_after)
      : grammar_(std::move(grammar)), state_(grammar_->initial()), begin_after_(begin_after) {}

  bool active() const override { return !begin_after_; }
  void allowed(uint32_t* words, int num_words) override { grammar_->allowed(state_, words, num_words); }
  bool complete() const override { return grammar_->accepting(state_); }
  bool finished() const override { return active() && grammar_->finished(state_); }
  bool advance(int32_t token) override {
    if (begin_after_) {
      if (token == *begin_after_) begin_after_.reset();
      return true;
    }
    return grammar_->advance(state_, token);
  }

 private:
  std::shared_ptr<Grammar> grammar_;
  typename Automaton::State state_;
  std::optional<int32_t> begin_after_;  // not begun yet
};

template <class Automaton>
std::shared_ptr<TokenConstraint> AutomatonGrammar<Automaton>::start(std::optional<int32_t> begin_after) {
  return std::make_shared<AutomatonConstraint<Automaton>>(this->shared_from_this(), begin_after);
}

}  // namespace

std::shared_ptr<StructuredGrammar> regex_grammar(std::string_view pattern,
                                                 std::shared_ptr<const TokenTrie> vocabulary,
                                                 size_t max_states) {
  return std::make_shared<AutomatonGrammar<RegexAutomaton>>(RegexAutomaton(pattern, max_states),
                                                            std::move(vocabulary));
}

std::shared_ptr<StructuredGrammar> ebnf_grammar(std::string_view grammar,
                                                std::shared_ptr<const TokenTrie> vocabulary) {
  return std::make_shared<AutomatonGrammar<EbnfAutomaton>>(EbnfAutomaton(parse_ebnf(grammar)),
                                                           std::move(vocabulary));
}

std::shared_ptr<StructuredGrammar> json_grammar(const JsonValueOptions& options,
                                                std::shared_ptr<const TokenTrie> vocabulary) {
  return std::make_shared<AutomatonGrammar<JsonAutomaton>>(JsonAutomaton(options), std::move(vocabulary));
}

}  // namespace tpserve::serve
