// CPU reference sampling: per-rank candidates, then the merge + filters + Gumbel-max draw (backend.h).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "common/counter_hash.h"
#include "runtime/backend/cpu/cpu_ops.h"

namespace tpserve::cpu {
namespace {

struct Candidate {
  float value;
  int32_t id;
};
bool better(const Candidate& a, const Candidate& b) { return a.value > b.value || (a.value == b.value && a.id < b.id); }

}  // namespace

void sampling_candidates(Tensor logits, int64_t vocab_begin, Tensor temperature, Tensor values, Tensor ids,
                         Tensor stats) {
  const int64_t rows = logits.dim(0), vocab = logits.dim(1), c = values.dim(1);
  TPS_CHECK(c <= vocab, "sampling_candidates: ", c, " candidates from ", vocab, " logits");
  std::vector<Candidate> all(vocab);
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits.ptr<float>() + r * vocab;
    for (int64_t v = 0; v < vocab; ++v) all[v] = {l[v], static_cast<int32_t>(vocab_begin + v)};
    std::partial_sort(all.begin(), all.begin() + c, all.end(), better);
    for (int64_t j = 0; j < c; ++j) {
      values.ptr<float>()[r * c + j] = all[j].value;
      ids.ptr<int32_t>()[r * c + j] = all[j].id;
    }
    const float temp = temperature.ptr<float>()[r];
    const float t = temp > 0.0f ? temp : 1.0f;
    const float max_logit = all[0].value;
    double sum = 0.0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp((l[v] - max_logit) / t);
    stats.ptr<float>()[r * 2] = max_logit;
    stats.ptr<float>()[r * 2 + 1] = static_cast<float>(sum);
  }
}

void sample(Tensor values, Tensor ids, Tensor stats, const SamplingInputs& params, Tensor tokens) {
  const int64_t ranks = values.dim(0), rows = values.dim(1), c = values.dim(2);
  std::vector<Candidate> merged(ranks * c);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < ranks; ++k)
      for (int64_t j = 0; j < c; ++j) {
        const int64_t i = (k * rows + r) * c + j;
        merged[k * c + j] = {values.ptr<float>()[i], ids.ptr<int32_t>()[i]};
      }
    std::partial_sort(merged.begin(), merged.begin() + c, merged.end(), better);
    const float temp = params.temperature.ptr<float>()[r];
    if (!(temp > 0.0f)) {  // greedy
      tokens.ptr<int32_t>()[r] = merged[0].id;
      continue;
    }
    // Global max and normaliser from the per-rank [max, sum exp] pairs.
    float global_max = -INFINITY;
    for (int64_t k = 0; k < ranks; ++k) global_max = std::max(global_max, stats.ptr<float>()[(k * rows + r) * 2]);
    double z = 0.0;
    for (int64_t k = 0; k < ranks; ++k) {
      const float* st = stats.ptr<float>() + (k * rows + r) * 2;
      z += static_cast<double>(st[1]) * std::exp((st[0] - global_max) / temp);
    }
    int64_t keep = c;
    const int top_k = params.top_k.ptr<int32_t>()[r];
    if (top_k > 0) keep = std::min<int64_t>(keep, top_k);
    const float min_p = params.min_p.ptr<float>()[r];
    if (min_p > 0.0f) {
      // p_i >= min_p * p_max  <=>  logit_i >= max + T * ln(min_p)
      const float threshold = merged[0].value + temp * std::log(min_p);
      int64_t n = 1;
      while (n < keep && merged[n].value >= threshold) ++n;
      keep = n;
    }
    const float top_p = params.top_p.ptr<float>()[r];
    if (top_p < 1.0f) {
      // The nucleus of the distribution left by top-k and min-p (renormalised), else of the full one.
      if (top_k > 0 || min_p > 0.0f) {
        z = 0.0;
        for (int64_t j = 0; j < keep; ++j) z += std::exp((merged[j].value - global_max) / temp);
      }
      double cumulative = 0.0;
      int64_t n = 0;
      while (n < keep) {
        cumulative += std::exp((merged[n].value - global_max) / temp) / z;
        ++n;
        if (cumulative >= top_p) break;
      }
      keep = std::max<int64_t>(n, 1);
    }
    const uint64_t seed = static_cast<uint64_t>(params.seed.ptr<int64_t>()[r]);
    const uint64_t counter = static_cast<uint64_t>(params.counter.ptr<int64_t>()[r]);
    double best = -INFINITY;
    int32_t token = merged[0].id;
    for (int64_t j = 0; j < keep; ++j) {
      const double gumbel = -std::log(-std::log(uniform_open01(seed, counter, static_cast<uint64_t>(merged[j].id))));
      const double key = merged[j].value / temp + gumbel;
      if (key > best) best = key, token = merged[j].id;
    }
    tokens.ptr<int32_t>()[r] = token;
  }
}

}  // namespace tpserve::cpu
