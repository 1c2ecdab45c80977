#include "runtime/serve/structured_grammars.h"

#include <vector>

#include "runtime/serve/tokenizer.h"

namespace tpserve::serve {

StructuredGrammars::StructuredGrammars(const Tokenizer& tokenizer, size_t capacity, size_t max_bytes)
    : StructuredGrammars(std::make_shared<const TokenTrie>(TokenTrie::of(tokenizer)), capacity, max_bytes) {}

StructuredGrammars::StructuredGrammars(std::shared_ptr<const TokenTrie> vocabulary, size_t capacity,
                                       size_t max_bytes)
    : vocabulary_(std::move(vocabulary)), capacity_(capacity), max_bytes_(max_bytes) {}

template <class Compile>
std::shared_ptr<StructuredGrammar> StructuredGrammars::cached(const std::string& key, Compile compile) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = by_key_.find(key); it != by_key_.end()) {
      recent_.splice(recent_.begin(), recent_, it->second);
      return it->second->second;
    }
  }
  // Compiled outside the lock (a large regex takes a while); two requests with one new rule may both
  // compile it, and the first to finish is kept.
  std::shared_ptr<StructuredGrammar> grammar = compile();
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = by_key_.find(key); it != by_key_.end()) return it->second->second;
  recent_.emplace_front(key, grammar);
  by_key_[key] = recent_.begin();
  std::vector<size_t> sizes;  // most recent first, as counted once
  size_t bytes = 0;
  for (const auto& entry : recent_) bytes += sizes.emplace_back(entry.second->bytes());
  while (recent_.size() > 1 && (recent_.size() > capacity_ || bytes > max_bytes_)) {
    bytes -= sizes.back();
    sizes.pop_back();
    by_key_.erase(recent_.back().first);
    recent_.pop_back();
  }
  return grammar;
}

std::shared_ptr<StructuredGrammar> StructuredGrammars::regex(const std::string& pattern) {
  return cached("regex:" + pattern, [&] { return regex_grammar(pattern, vocabulary_); });
}

std::shared_ptr<StructuredGrammar> StructuredGrammars::ebnf(const std::string& grammar) {
  return cached("ebnf:" + grammar, [&] { return ebnf_grammar(grammar, vocabulary_); });
}

std::shared_ptr<StructuredGrammar> StructuredGrammars::json(const JsonValueOptions& options) {
  const std::string key =
      "json:" + std::to_string(options.top_level_object) + ":" + std::to_string(options.max_depth) + ":" +
      std::to_string(options.max_whitespace_run) + ":" + std::to_string(options.trailing_whitespace);
  return cached(key, [&] { return json_grammar(options, vocabulary_); });
}

}  // namespace tpserve::serve
