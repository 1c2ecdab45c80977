// StructuredGrammars: the server's compiled structured-output rules, by their text (a regex, a JSON schema,
// JSON mode, an EBNF grammar), over one vocabulary trie built at start. Requests that send a rule another
// sent recently take its compiled grammar and its memoized masks (most clients send the same few schemas). At
// most `capacity` rules and `max_bytes` bytes (automata and masks, as of each insertion) are kept, the least
// recently used let go first (requests running under one keep it). Thread-safe: HTTP threads compile and look
// up; the engine's thread uses the grammars.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "runtime/serve/json_value_automaton.h"
#include "runtime/serve/structured_grammar.h"
#include "runtime/serve/token_trie.h"

namespace tpserve::serve {

class Tokenizer;

class StructuredGrammars {
 public:
  static constexpr size_t kDefaultCapacity = 64, kDefaultMaxBytes = size_t(512) << 20;
  explicit StructuredGrammars(const Tokenizer& tokenizer, size_t capacity = kDefaultCapacity,
                              size_t max_bytes = kDefaultMaxBytes);
  explicit StructuredGrammars(std::shared_ptr<const TokenTrie> vocabulary, size_t capacity = kDefaultCapacity,
                              size_t max_bytes = kDefaultMaxBytes);

  // Throw tpserve::Error with a message for the API user when the rule cannot be compiled.
  std::shared_ptr<StructuredGrammar> regex(const std::string& pattern);
  std::shared_ptr<StructuredGrammar> json(const JsonValueOptions& options);
  std::shared_ptr<StructuredGrammar> ebnf(const std::string& grammar);

 private:
  template <class Compile>
  std::shared_ptr<StructuredGrammar> cached(const std::string& key, Compile compile);

  std::shared_ptr<const TokenTrie> vocabulary_;
  size_t capacity_, max_bytes_;
  std::mutex mutex_;
  std::list<std::pair<std::string, std::shared_ptr<StructuredGrammar>>> recent_;  // most recent first
  std::unordered_map<std::string, decltype(recent_)::iterator> by_key_;
};

}  // namespace tpserve::serve
