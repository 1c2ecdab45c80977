// TokenConstraint: a rule over the tokens a request may generate (structured output: a regular expression,
// a JSON schema, JSON mode), held with the request's sequence on rank 0. Each step the scheduler asks it for
// the tokens allowed next (a bitmask the step carries: StepBatch::token_masks) and tells it every token the
// request generated. The rule knows the vocabulary's bytes; the engine knows only ids.
#pragma once

#include <cstdint>

namespace tpserve {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Whether the next token is constrained (false while the rule has not begun, e.g. during reasoning).
  virtual bool active() const = 0;
  // Sets the bits of the tokens the rule allows next (token t: bit t % 32 of words[t / 32]; the caller has
  // zeroed num_words words). The request's stop tokens are the caller's to add, when complete().
  virtual void allowed(uint32_t* words, int num_words) = 0;
  // The text so far is whole: the request may stop here.
  virtual bool complete() const = 0;
  // Whole, and nothing may follow: the request ends with its last token.
  virtual bool finished() const = 0;
  // A generated token, in order (stop tokens are not passed). False: the token breaks the rule (it was not
  // allowed); the rule is then left as it was.
  virtual bool advance(int32_t token) = 0;
};

}  // namespace tpserve
