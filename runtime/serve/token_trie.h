// TokenTrie: the vocabulary's tokens as a trie of their bytes, for structured output: the tokens a rule
// allows next are found by walking the trie beside the rule's automaton, so that tokens sharing a prefix
// share its steps, and a prefix the rule refuses cuts off every token under it. Added tokens (special or not:
// <|im_end|>, <think>, <tool_call>) and ids without bytes are left out: a rule never allows them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tpserve::serve {

class Tokenizer;

class TokenTrie {
 public:
  // tokens[id] = the token's bytes (empty: left out).
  explicit TokenTrie(const std::vector<std::string>& tokens);
  // The tokenizer's vocabulary, added tokens left out.
  static TokenTrie of(const Tokenizer& tokenizer);

  // Sets in `words` (bit t % 32 of words[t / 32]; ids past num_words * 32 are skipped) the bit of every token
  // whose bytes the automaton takes from `from`. Automaton: State (copyable) and bool step(State&, uint8_t)
  // that leaves the state unchanged and returns false for a byte it refuses.
  template <class Automaton>
  void allowed_tokens(Automaton& automaton, const typename Automaton::State& from, uint32_t* words,
                      int num_words) const;

  // The bytes of token `id` (empty: special, or outside the vocabulary).
  const std::string& bytes(int32_t id) const;
  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }
  size_t num_tokens() const { return token_ids_.size(); }

 private:
  struct Node {
    uint32_t first_edge = 0, num_edges = 0;    // edges_[first_edge, first_edge + num_edges), by byte
    uint32_t first_token = 0, num_tokens = 0;  // token_ids_[...]: the ids whose bytes end here
  };
  struct Edge {
    uint8_t byte = 0;
    uint32_t child = 0;
  };
  // Adds the node of the tokens in sorted_[lo, hi), which share their first `depth` bytes; returns its index.
  uint32_t build(size_t lo, size_t hi, size_t depth);
  void set_bits(const Node& node, uint32_t* words, int num_words) const;

  std::vector<std::pair<std::string, int32_t>> sorted_;  // building only
  std::vector<Node> nodes_;                              // nodes_[0]: the root (the empty prefix)
  std::vector<Edge> edges_;
  std::vector<int32_t> token_ids_;
  std::vector<std::string> bytes_;  // by id
};

template <class Automaton>
void TokenTrie::allowed_tokens(Automaton& automaton, const typename Automaton::State& from, uint32_t* words,
                               int num_words) const {
  struct Visit {
    uint32_t node;
    typename Automaton::State state;
  };
  std::vector<Visit> stack{{0, from}};
  while (!stack.empty()) {
    const Visit v = std::move(stack.back());
    stack.pop_back();
    const Node& node = nodes_[v.node];
    for (uint32_t e = node.first_edge; e < node.first_edge + node.num_edges; ++e) {
      typename Automaton::State s = v.state;
      if (!automaton.step(s, edges_[e].byte)) continue;
      const Node& child = nodes_[edges_[e].child];
      set_bits(child, words, num_words);
      if (child.num_edges > 0) stack.push_back({edges_[e].child, std::move(s)});
    }
  }
}

}  // namespace tpserve::serve
