#include "runtime/serve/incremental_detokenizer.h"

#include "runtime/serve/utf8.h"

namespace tpserve::serve {

std::string IncrementalDetokenizer::push(int32_t id) {
  if (skip_special_tokens_ && tokenizer_.is_special(id)) return {};
  pending_ += tokenizer_.token_bytes(id);
  const size_t hold = utf8_incomplete_tail(pending_);
  std::string text = repair_utf8(std::string_view(pending_).substr(0, pending_.size() - hold));
  pending_.erase(0, pending_.size() - hold);
  return text;
}

std::string IncrementalDetokenizer::finish() {
  std::string text = repair_utf8(pending_);
  pending_.clear();
  return text;
}

}  // namespace tpserve::serve
