// Checks a request's logit processing (bias, penalties, min_tokens) through an engine: every emitted
// token's step logits against the raw logits of the same prefix from a plain engine, processed by an
// independent reference of vLLM's rules. Shared by the CPU model tests and the GPU tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "runtime/engine/engine.h"

namespace tpserve::testing_util {

// The logits a plain engine (EngineOptions::keep_logits) computes for the token after `prefix`.
inline std::vector<float> raw_logits(Engine& plain, const std::vector<int32_t>& prefix) {
  static int64_t next_id = 1000000;
  plain.scheduler().add(Request{.id = next_id++, .prompt = prefix, .max_tokens = 1, .ignore_eos = true});
  std::vector<float> logits, last;
  while (plain.scheduler().has_work())
    if (!plain.step(&logits).empty()) last = logits;
  return last;
}

// vLLM's rules, written apart from LogitAdjuster: bias (and -inf for stop tokens before min_tokens), then
// the repetition penalty over prompt and output tokens, then frequency and presence over output tokens.
inline std::vector<float> processed_logits(std::vector<float> l, const Request& r,
                                           const std::vector<int32_t>& generated) {
  const LogitProcessing& p = r.processing;
  for (const auto& [token, bias] : p.logit_bias) l[token] += bias;
  if (static_cast<int>(generated.size()) < p.min_tokens)
    for (int32_t token : r.stop_token_ids) l[token] = -INFINITY;
  std::set<int32_t> seen(r.prompt.begin(), r.prompt.end());
  std::map<int32_t, int> counts;
  for (int32_t token : generated) seen.insert(token), ++counts[token];
  for (int32_t token : seen)
    l[token] = l[token] > 0 ? l[token] / p.repetition_penalty : l[token] * p.repetition_penalty;
  for (const auto& [token, n] : counts) l[token] -= p.frequency_penalty * n + p.presence_penalty;
  return l;
}

struct ProcessedRun {
  std::vector<int32_t> tokens;
  int64_t drafts = 0, accepted = 0;
};

// Runs `r` alone on `run` (keep_logits), checking every emitted token's logits (-inf exactly, the others
// within atol + rtol * |want|) against processed_logits() of `plain`'s raw logits, and, with `mirror` (a
// second instance of r's structured-output rule, for requests with ignore_eos and no stop ids), -inf for
// the tokens the rule refuses.
inline ProcessedRun check_processed_run(Engine& run, Engine& plain, const Request& r, double atol,
                                        double rtol, TokenConstraint* mirror = nullptr) {
  const int64_t vocab = run.model().spec().vocab_size;
  run.scheduler().add(r);
  ProcessedRun out;
  std::vector<float> logits;
  while (run.scheduler().has_work()) {
    const auto events = run.step(&logits);
    for (size_t j = 0; j < events.size(); ++j) {  // one sequence: event j was drawn at sampled row j
      std::vector<int32_t> prefix = r.prompt;
      prefix.insert(prefix.end(), out.tokens.begin(), out.tokens.end());
      std::vector<float> want = processed_logits(raw_logits(plain, prefix), r, out.tokens);
      if (mirror != nullptr && mirror->active()) {
        std::vector<uint32_t> words(static_cast<size_t>(mask_words(vocab)), 0u);
        mirror->allowed(words.data(), static_cast<int>(words.size()));
        for (int64_t v = 0; v < vocab; ++v)
          if (!((words[v / 32] >> (v % 32)) & 1u)) want[v] = -INFINITY;
      }
      int mismatches = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        const float got = logits[j * vocab + v];
        const bool ok =
            std::isinf(want[v]) ? got == want[v] : std::abs(got - want[v]) <= atol + rtol * std::abs(want[v]);
        if (!ok && ++mismatches <= 3)
          ADD_FAILURE() << "token " << out.tokens.size() << " logit " << v << ": " << got << " vs "
                        << want[v];
      }
      out.tokens.push_back(events[j].token);
      if (mirror != nullptr) {
        EXPECT_TRUE(mirror->advance(events[j].token)) << "token " << out.tokens.size();
      }
    }
  }
  out.drafts = run.scheduler().speculative_metrics().drafts;
  out.accepted = run.scheduler().speculative_metrics().accepted_tokens;
  return out;
}

}  // namespace tpserve::testing_util
