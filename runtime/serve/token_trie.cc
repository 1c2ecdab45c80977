#include "runtime/serve/token_trie.h"

#include <algorithm>

#include "runtime/serve/tokenizer.h"

namespace tpserve::serve {

TokenTrie::TokenTrie(const std::vector<std::string>& tokens) : bytes_(tokens) {
  for (size_t id = 0; id < tokens.size(); ++id)
    if (!tokens[id].empty()) sorted_.emplace_back(tokens[id], static_cast<int32_t>(id));
  std::sort(sorted_.begin(), sorted_.end());
  token_ids_.reserve(sorted_.size());
  build(0, sorted_.size(), 0);
  sorted_ = {};
}

TokenTrie TokenTrie::of(const Tokenizer& tokenizer) {
  std::vector<std::string> tokens(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) tokens[id] = tokenizer.token_bytes(id);
  // Added tokens, special or not (Qwen3's <think>, <tool_call>, ...), are markup, not text a rule matches.
  for (const AddedToken& added : tokenizer.added_tokens())
    if (added.id >= 0 && added.id < tokenizer.vocab_size()) tokens[added.id].clear();
  return TokenTrie(tokens);
}

const std::string& TokenTrie::bytes(int32_t id) const {
  static const std::string none;
  return id >= 0 && id < vocab_size() ? bytes_[id] : none;
}

uint32_t TokenTrie::build(size_t lo, size_t hi, size_t depth) {
  const auto index = static_cast<uint32_t>(nodes_.size());
  nodes_.emplace_back();
  // Sorted: the tokens that end here (all `depth` bytes long: equal bytes, several ids) come first.
  size_t at = lo;
  nodes_[index].first_token = static_cast<uint32_t>(token_ids_.size());
  for (; at < hi && sorted_[at].first.size() == depth; ++at) token_ids_.push_back(sorted_[at].second);
  nodes_[index].num_tokens = static_cast<uint32_t>(token_ids_.size()) - nodes_[index].first_token;
  // One child per next byte; the edges of a node are contiguous, so they are added before any child's.
  std::vector<std::pair<size_t, size_t>> groups;
  while (at < hi) {
    const auto byte = static_cast<uint8_t>(sorted_[at].first[depth]);
    size_t end = at;
    while (end < hi && static_cast<uint8_t>(sorted_[end].first[depth]) == byte) ++end;
    groups.emplace_back(at, end);
    at = end;
  }
  nodes_[index].first_edge = static_cast<uint32_t>(edges_.size());
  nodes_[index].num_edges = static_cast<uint32_t>(groups.size());
  for (const auto& [begin, end] : groups)
    edges_.push_back({static_cast<uint8_t>(sorted_[begin].first[depth]), 0});
  for (size_t g = 0; g < groups.size(); ++g) {
    const uint32_t child = build(groups[g].first, groups[g].second, depth + 1);
    edges_[nodes_[index].first_edge + g].child = child;
  }
  return index;
}

void TokenTrie::set_bits(const Node& node, uint32_t* words, int num_words) const {
  for (uint32_t i = node.first_token; i < node.first_token + node.num_tokens; ++i) {
    const int32_t t = token_ids_[i];
    if (t / 32 < num_words) words[t / 32] |= 1u << (t % 32);
  }
}

}  // namespace tpserve::serve
