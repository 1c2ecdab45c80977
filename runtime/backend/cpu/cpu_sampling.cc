// CPU reference sampling: per-rank candidates, then the merge + filters + Gumbel-max draw (backend.h), and
// speculative verification (greedy acceptance, or rejection sampling against greedy drafts).
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
bool better(const Candidate& a, const Candidate& b) {
  return a.value > b.value || (a.value == b.value && a.id < b.id);
}

// One row's filtered distribution over the merged candidates of every rank.
class RowDistribution {
 public:
  RowDistribution(Tensor values, Tensor ids, Tensor stats, const SamplingInputs& params, int64_t row) {
    const int64_t ranks = values.dim(0), rows = values.dim(1), c = values.dim(2);
    merged_.resize(ranks * c);
    for (int64_t k = 0; k < ranks; ++k)
      for (int64_t j = 0; j < c; ++j) {
        const int64_t i = (k * rows + row) * c + j;
        merged_[k * c + j] = {values.ptr<float>()[i], ids.ptr<int32_t>()[i]};
      }
    std::partial_sort(merged_.begin(), merged_.begin() + c, merged_.end(), better);
    merged_.resize(c);
    temp_ = params.temperature.ptr<float>()[row];
    seed_ = static_cast<uint64_t>(params.seed.ptr<int64_t>()[row]);
    counter_ = static_cast<uint64_t>(params.counter.ptr<int64_t>()[row]);
    if (greedy()) {
      keep_ = 1;
      return;
    }
    // Global max and normaliser from the per-rank [max, sum exp] pairs.
    max_ = -INFINITY;
    for (int64_t k = 0; k < ranks; ++k) max_ = std::max(max_, stats.ptr<float>()[(k * rows + row) * 2]);
    double z = 0.0;
    for (int64_t k = 0; k < ranks; ++k) {
      const float* st = stats.ptr<float>() + (k * rows + row) * 2;
      z += static_cast<double>(st[1]) * std::exp((st[0] - max_) / temp_);
    }
    keep_ = c;
    const int top_k = params.top_k.ptr<int32_t>()[row];
    if (top_k > 0) keep_ = std::min<int64_t>(keep_, top_k);
    const float min_p = params.min_p.ptr<float>()[row];
    if (min_p > 0.0f) {
      // p_i >= min_p * p_max  <=>  logit_i >= max + T * ln(min_p)
      const float threshold = merged_[0].value + temp_ * std::log(min_p);
      int64_t n = 1;
      while (n < keep_ && merged_[n].value >= threshold) ++n;
      keep_ = n;
    }
    // The nucleus of the distribution left by top-k and min-p (renormalised), else of the full one.
    if (top_k > 0 || min_p > 0.0f) z = kept_mass();
    const float top_p = params.top_p.ptr<float>()[row];
    if (top_p < 1.0f) {
      double cumulative = 0.0;
      int64_t n = 0;
      while (n < keep_) {
        cumulative += weight(n) / z;
        ++n;
        if (cumulative >= top_p) break;
      }
      keep_ = std::max<int64_t>(n, 1);
    }
  }

  bool greedy() const { return !(temp_ > 0.0f); }
  int32_t best() const { return merged_[0].id; }

  // Gumbel-max draw over the kept tokens (greedy: the best).
  int32_t draw() const {
    if (greedy()) return best();
    double best_key = -INFINITY;
    int32_t token = best();
    for (int64_t j = 0; j < keep_; ++j) {
      const double gumbel =
          -std::log(-std::log(uniform_open01(seed_, counter_, static_cast<uint64_t>(merged_[j].id))));
      const double key = merged_[j].value / temp_ + gumbel;
      if (key > best_key) best_key = key, token = merged_[j].id;
    }
    return token;
  }

 private:
  double weight(int64_t j) const { return std::exp((merged_[j].value - max_) / temp_); }
  double kept_mass() const {
    double m = 0.0;
    for (int64_t j = 0; j < keep_; ++j) m += weight(j);
    return m;
  }

  std::vector<Candidate> merged_;
  float temp_ = 0.0f;
  float max_ = 0.0f;
  int64_t keep_ = 1;
  uint64_t seed_ = 0, counter_ = 0;
};

}  // namespace

void sampling_candidates(Tensor logits, int64_t vocab_begin, Tensor temperature, Tensor values, Tensor ids,
                         Tensor stats) {
  const int64_t rows = logits.dim(0), vocab = logits.dim(1), c = values.dim(1);
  TPS_CHECK(c <= vocab, "sampling_candidates: ", c, " candidates from ", vocab, " logits");
  std::vector<Candidate> all(vocab);
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits.ptr<float>() + r * vocab;
    for (int64_t v = 0; v < vocab; ++v) all[v] = {l[v], static_cast<int32_t>(vocab_begin + v)};
    const float temp = temperature.ptr<float>()[r];
    const bool greedy = !(temp > 0.0f);  // the best alone, in every place (Backend::sampling_candidates)
    std::partial_sort(all.begin(), all.begin() + (greedy ? 1 : c), all.end(), better);
    for (int64_t j = 0; j < c; ++j) {
      values.ptr<float>()[r * c + j] = all[greedy ? 0 : j].value;
      ids.ptr<int32_t>()[r * c + j] = all[greedy ? 0 : j].id;
    }
    const float t = temp > 0.0f ? temp : 1.0f;
    const float max_logit = all[0].value;
    double sum = 0.0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp((l[v] - max_logit) / t);
    stats.ptr<float>()[r * 2] = max_logit;
    stats.ptr<float>()[r * 2 + 1] = static_cast<float>(sum);
  }
}

void adjust_logits(Tensor logits, int64_t vocab_begin, Tensor targets, Tensor values) {
  const int64_t rows = logits.dim(0), vocab = logits.dim(1), n = targets.dim(0);
  TPS_CHECK(targets.numel() == 2 * n && values.numel() == 3 * n, "adjust_logits: targets ",
            targets.shape_string(), " values ", values.shape_string());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = targets.ptr<int32_t>()[2 * i],
                  column = targets.ptr<int32_t>()[2 * i + 1] - vocab_begin;
    if (row < 0 || row >= rows || column < 0 || column >= vocab) continue;  // another rank's slice
    const float* v = values.ptr<float>() + 3 * i;
    float& logit = logits.ptr<float>()[row * vocab + column];
    const float x = logit + v[0];
    logit = (x > 0.0f ? x / v[1] : x * v[1]) - v[2];
  }
}

void mask_logits(Tensor logits, int64_t vocab_begin, Tensor rows, Tensor masks) {
  const int64_t num_rows = logits.dim(0), vocab = logits.dim(1), n = rows.numel();
  TPS_CHECK(masks.ndim == 2 && masks.dim(0) == n && (vocab_begin + vocab + 31) / 32 <= masks.dim(1),
            "mask_logits: logits ", logits.shape_string(), " from ", vocab_begin, " rows ",
            rows.shape_string(), " masks ", masks.shape_string());
  for (int64_t m = 0; m < n; ++m) {
    const int64_t row = rows.ptr<int32_t>()[m];
    TPS_CHECK(row >= 0 && row < num_rows, "mask_logits: row ", row, " of ", num_rows);
    const auto* words = reinterpret_cast<const uint32_t*>(masks.ptr<int32_t>() + m * masks.dim(1));
    float* x = logits.ptr<float>() + row * vocab;
    for (int64_t v = 0; v < vocab; ++v) {
      const int64_t t = vocab_begin + v;
      if (!((words[t / 32] >> (t % 32)) & 1u)) x[v] = -INFINITY;
    }
  }
}

void sample(Tensor values, Tensor ids, Tensor stats, const SamplingInputs& params, Tensor tokens) {
  for (int64_t r = 0; r < values.dim(1); ++r)
    tokens.ptr<int32_t>()[r] = RowDistribution(values, ids, stats, params, r).draw();
}

void verify_and_sample(Tensor values, Tensor ids, Tensor stats, const SamplingInputs& params,
                       Tensor row_tokens, Tensor group_start, Tensor emitted, Tensor accepted) {
  const int32_t* start = group_start.ptr<int32_t>();
  for (int64_t g = 0; g + 1 < group_start.dim(0); ++g) {
    int32_t taken = 0;
    for (int32_t r = start[g]; r < start[g + 1]; ++r) emitted.ptr<int32_t>()[r] = -1;
    // Each row emits its own draw. The draft after it (a single token: the drafter is greedy) is accepted iff
    // that draw is the draft: with probability p(draft); a rejection emits the draw, which is then p
    // conditioned on not being the draft - the rejection sampler's residual max(p - q, 0). The group's last
    // row draws the bonus token. So the tokens are the plain draws, and seeded decoding gives the same tokens
    // with and without drafts (and after a preemption drops them).
    for (int32_t r = start[g]; r < start[g + 1]; ++r) {
      const int32_t drawn = RowDistribution(values, ids, stats, params, r).draw();
      emitted.ptr<int32_t>()[r] = drawn;
      if (r + 1 == start[g + 1] || drawn != row_tokens.ptr<int32_t>()[r + 1]) break;
      ++taken;
    }
    accepted.ptr<int32_t>()[g] = taken;
  }
}

}  // namespace tpserve::cpu
