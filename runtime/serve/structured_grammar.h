// StructuredGrammar: a rule a request's output must follow (structured output: a regular expression, a JSON
// schema turned into one, an EBNF grammar, or JSON mode's any-object automaton), compiled over the
// tokenizer's vocabulary and shared by every request and choice that sends the same rule. start() gives one
// request its TokenConstraint (runtime/engine/token_constraint.h): the scheduler asks it for each step's
// token mask. Masks are memoized per automaton state (the 512 most recently used): a rule's first step
// through a state walks the vocabulary trie (milliseconds for the 151k-token Qwen3 vocabulary), later ones
// copy the mask.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "runtime/engine/token_constraint.h"
#include "runtime/serve/json_value_automaton.h"
#include "runtime/serve/token_trie.h"

namespace tpserve::serve {

class StructuredGrammar {
 public:
  virtual ~StructuredGrammar() = default;
  // One request's constraint, at the rule's start. begin_after: the output is free until this token is
  // generated (the end of a reasoning block), and follows the rule from the next token on.
  virtual std::shared_ptr<TokenConstraint> start(std::optional<int32_t> begin_after = std::nullopt) = 0;
  // Bytes it holds: its automaton and its memoized masks.
  virtual size_t bytes() = 0;
};

// Whole-text regular expressions (RegexDfa's syntax). The automaton is built whole here, so that a rule too
// large to build (more than max_states states) is refused now, with a message for the API user (throws
// tpserve::Error), not while the engine steps.
std::shared_ptr<StructuredGrammar> regex_grammar(std::string_view pattern,
                                                 std::shared_ptr<const TokenTrie> vocabulary,
                                                 size_t max_states = 100000);
// Text of an EBNF grammar (runtime/serve/ebnf_grammar.h's notation). Throws tpserve::Error with a message
// for the API user when the grammar cannot be compiled.
std::shared_ptr<StructuredGrammar> ebnf_grammar(std::string_view grammar,
                                                std::shared_ptr<const TokenTrie> vocabulary);
// JSON text (JSON mode: an object under the default options).
std::shared_ptr<StructuredGrammar> json_grammar(const JsonValueOptions& options,
                                                std::shared_ptr<const TokenTrie> vocabulary);

}  // namespace tpserve::serve
