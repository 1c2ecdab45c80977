#include "runtime/serve/bpe_model.h"

#include <queue>

#include "common/error.h"

namespace tpserve::serve {

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges)
    : vocab_(std::move(vocab)) {
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(alphabet_.encode_byte(static_cast<uint8_t>(b)));
    TPS_CHECK(it != vocab_.end(), "tokenizer: the vocabulary has no token for byte 0x", std::hex, b,
              " (byte-level BPE needs all 256)");
    byte_ids_[b] = it->second;
  }
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    auto l = vocab_.find(left), r = vocab_.find(right), m = vocab_.find(left + right);
    TPS_CHECK(l != vocab_.end() && r != vocab_.end() && m != vocab_.end(), "tokenizer: merge ", rank, " ('",
              left, "' '", right, "') names a token outside the vocabulary");
    // A pair listed twice keeps its first (lowest) rank.
    merges_.emplace(pair_key(l->second, r->second), Merge{static_cast<int32_t>(rank), m->second});
  }
}

void BpeModel::merge_symbols(std::vector<int32_t>& symbols) const {
  const int n = static_cast<int>(symbols.size());
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1;
  struct Candidate {
    int32_t rank;
    int pos;
    int32_t left, right;  // the ids the pair had when queued (stale when either side changed since)
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int pos) {
    if (pos < 0 || next[pos] < 0) return;
    auto it = merges_.find(pair_key(symbols[pos], symbols[next[pos]]));
    if (it != merges_.end()) queue.push({it->second.rank, pos, symbols[pos], symbols[next[pos]]});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  std::vector<bool> removed(n, false);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    if (removed[c.pos] || next[c.pos] < 0) continue;
    const int right = next[c.pos];
    if (symbols[c.pos] != c.left || symbols[right] != c.right) continue;  // stale
    symbols[c.pos] = merges_.at(pair_key(c.left, c.right)).merged_id;
    removed[right] = true;
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    consider(prev[c.pos]);
    consider(c.pos);
  }
  size_t out = 0;
  for (int i = 0; i < n; ++i)
    if (!removed[i]) symbols[out++] = symbols[i];
  symbols.resize(out);
}

void BpeModel::encode_piece(std::string_view bytes, std::vector<int32_t>& ids) const {
  if (bytes.empty()) return;
  const std::string text = alphabet_.encode(bytes);
  if (auto it = vocab_.find(text); it != vocab_.end()) {
    ids.push_back(it->second);
    return;
  }
  const bool cacheable = bytes.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (auto it = cache_.find(text); it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> symbols(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) symbols[i] = byte_ids_[static_cast<uint8_t>(bytes[i])];
  merge_symbols(symbols);
  ids.insert(ids.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(text, std::move(symbols));
  }
}

}  // namespace tpserve::serve
