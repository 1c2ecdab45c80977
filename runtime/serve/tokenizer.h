// Tokenizer: a Hugging Face tokenizer.json of the byte-level BPE kind (Qwen2/Qwen3, GPT-2 style): added
// tokens are split out first (leftmost, longest match), the rest is NFC-normalized, pre-tokenized with the
// file's regex, mapped to GPT-2's byte alphabet and merged by BpeModel. Decoding maps ids back to bytes and
// repairs invalid UTF-8 with U+FFFD. Immutable after loading and safe to use from many threads.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/serve/bpe_model.h"
#include "runtime/serve/pretokenizer.h"

namespace tpserve::serve {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;  // skipped by decode(..., skip_special_tokens = true)
};

class Tokenizer {
 public:
  // Loads a tokenizer.json; throws tpserve::Error naming the file and what is wrong or unsupported.
  static std::unique_ptr<Tokenizer> load(const std::string& path);
  static std::unique_ptr<Tokenizer> from_json_text(const std::string& json_text, const std::string& source);
  ~Tokenizer();

  // Text (valid UTF-8; throws otherwise) -> ids. With parse_special, added tokens written in the text
  // (e.g. "<|im_start|>") become their ids, as Hugging Face does by default.
  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;
  // Ids -> text; ids outside the vocabulary are skipped; special tokens too with skip_special_tokens.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = true) const;

  // The raw bytes a token stands for (empty for ids outside the vocabulary).
  const std::string& token_bytes(int32_t id) const;
  bool is_special(int32_t id) const;
  // The id of a token given as its text (added tokens by content, others in byte-level spelling).
  std::optional<int32_t> token_id(std::string_view token) const;
  // One past the largest id.
  int32_t vocab_size() const { return static_cast<int32_t>(id_to_bytes_.size()); }
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  const Pretokenizer& pretokenizer() const { return *pretokenizer_; }

 private:
  Tokenizer() = default;
  void encode_ordinary(std::string_view text, std::vector<int32_t>& ids) const;
  // The added token starting at text[pos] (longest), or nullptr.
  const AddedToken* added_token_at(std::string_view text, size_t pos) const;

  bool nfc_ = false;
  std::unique_ptr<Pretokenizer> pretokenizer_;
  std::unique_ptr<BpeModel> bpe_;
  std::vector<AddedToken> added_;             // longest content first
  std::array<bool, 256> added_first_byte_{};  // bytes an added token starts with
  std::vector<std::string> id_to_bytes_;
  std::vector<uint8_t> special_;  // per id
};

}  // namespace tpserve::serve
