// A structured-output rule for tests, over token ids alone: after n accepted tokens, token t is allowed when
// (t + n) % modulus == 0; the text is whole after `length` tokens and then finished (nothing may follow)
// unless `open_end`, where any token may follow a whole text.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/engine/token_constraint.h"

namespace tpserve::testing_util {

class ModuloConstraint : public TokenConstraint {
 public:
  ModuloConstraint(int modulus, int length, bool open_end = false, int32_t begin_after = -1)
      : modulus_(modulus), length_(length), open_end_(open_end), begin_after_(begin_after) {}

  bool allows(int32_t token) const { return (token + n_) % modulus_ == 0; }
  bool active() const override { return begin_after_ < 0; }
  void allowed(uint32_t* words, int num_words) override {
    for (int64_t t = 0; t < int64_t(num_words) * 32; ++t)
      if (allows(static_cast<int32_t>(t))) words[t / 32] |= 1u << (t % 32);
  }
  bool complete() const override { return n_ >= length_; }
  bool finished() const override { return active() && complete() && !open_end_; }
  bool advance(int32_t token) override {
    advanced.push_back(token);
    if (!active()) {
      if (token == begin_after_) begin_after_ = -1;
      return true;
    }
    if (!allows(token)) return false;
    ++n_;
    return true;
  }

  std::vector<int32_t> advanced;  // every token advance() was given

 private:
  int modulus_, length_;
  bool open_end_;
  int32_t begin_after_;
  int n_ = 0;
};

}  // namespace tpserve::testing_util
