// For prefix-caching tests on any backend: the logits a prompt's first token is drawn from, on an engine
// that served other requests to completion first (so that their blocks are cached), and how many of the
// prompt's tokens the prefix cache held.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "runtime/engine/engine.h"

namespace tpserve::testing_util {

struct FirstTokenLogits {
  std::vector<float> logits;  // [vocab]
  int cached_tokens = 0;
};

inline FirstTokenLogits first_token_logits(Engine& engine, const std::vector<std::vector<int32_t>>& earlier,
                                           const std::vector<int32_t>& prompt) {
  for (const auto& p : earlier) engine.generate(p, SamplingParams{}, 4, true);
  Scheduler& s = engine.scheduler();
  s.take_admitted();
  s.add(Request{.id = 1 << 30, .prompt = prompt, .max_tokens = 1, .ignore_eos = true});
  FirstTokenLogits out;
  engine.step(&out.logits);  // the whole prompt fits one chunk: this step draws the first token
  EXPECT_FALSE(s.has_work());
  const auto admitted = s.take_admitted();
  EXPECT_EQ(admitted.size(), 1u);
  if (!admitted.empty()) out.cached_tokens = admitted[0].cached_tokens;
  return out;
}

}  // namespace tpserve::testing_util
