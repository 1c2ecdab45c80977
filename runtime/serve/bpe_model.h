// BpeModel: byte-level BPE over one pre-tokenized piece. The piece's bytes start as single-byte tokens and
// the lowest-ranked adjacent pair is merged until no merge applies (leftmost first among equal ranks), as in
// Hugging Face tokenizers; a heap keeps this O(n log n) for long pieces. Results for short pieces are cached
// (thread-safe, bounded).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/serve/byte_level.h"

namespace tpserve::serve {

class BpeModel {
 public:
  // vocab: byte-level token text -> id; merges in rank order (byte-level text pairs). Throws tpserve::Error
  // when a byte has no token or a merge names a token outside the vocabulary.
  BpeModel(std::unordered_map<std::string, int32_t> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges);

  // Appends the ids of one piece of raw bytes.
  void encode_piece(std::string_view bytes, std::vector<int32_t>& ids) const;

  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }
  const ByteLevelAlphabet& alphabet() const { return alphabet_; }
  size_t num_merges() const { return merges_.size(); }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  void merge_symbols(std::vector<int32_t>& symbols) const;

  ByteLevelAlphabet alphabet_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::array<int32_t, 256> byte_ids_{};
  std::unordered_map<uint64_t, Merge> merges_;

  static constexpr size_t kMaxCachedPieceBytes = 64;
  static constexpr size_t kMaxCacheEntries = 1 << 16;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace tpserve::serve
