// CPU reference for the router's top-k softmax gating and for the experts of a MoE layer.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "runtime/backend/cpu/cpu_ops.h"

namespace tpserve::cpu {

void topk_gating(Tensor router_logits, int k, bool renormalize, Tensor weights, Tensor ids) {
  const int64_t tokens = router_logits.dim(0), experts = router_logits.dim(1);
  TPS_CHECK(k >= 1 && k <= experts, "topk_gating: k=", k, " with ", experts, " experts");
  std::vector<float> logits(experts), probs(experts);
  std::vector<int> order(experts);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = router_logits.ptr<float>() + t * experts;
    // A NaN logit counts as -inf: picked after every number, adding nothing to the softmax's sum.
    for (int64_t e = 0; e < experts; ++e) logits[e] = std::isnan(row[e]) ? -INFINITY : row[e];
    const float max_logit = *std::max_element(logits.begin(), logits.end());
    float sum = 0.0f;
    for (int64_t e = 0; e < experts; ++e) sum += (probs[e] = std::exp(logits[e] - max_logit));
    for (int64_t e = 0; e < experts; ++e) probs[e] /= sum;
    std::iota(order.begin(), order.end(), 0);
    // The k most probable are the k largest logits (the softmax is monotone); ordering by the logits keeps
    // two different logits whose probabilities round equal in their order. Ties go to the smaller index.
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    float picked = 0.0f;
    for (int j = 0; j < k; ++j) picked += probs[order[j]];
    for (int j = 0; j < k; ++j) {
      weights.ptr<float>()[t * k + j] = renormalize ? probs[order[j]] / picked : probs[order[j]];
      ids.ptr<int32_t>()[t * k + j] = order[j];
    }
  }
}

namespace {
// y = down_e(silu(gate_e(x)) * up_e(x)) for local expert e.
void expert_mlp(const float* x, Tensor gate_up, Tensor down, int64_t e, std::vector<float>& gu,
                std::vector<float>& act, float* y) {
  const int64_t hidden = gate_up.dim(2), inter = gate_up.dim(1) / 2;
  matvec(gate_up.ptr<float>() + e * 2 * inter * hidden, x, 2 * inter, hidden, gu.data());
  for (int64_t i = 0; i < inter; ++i) act[i] = gu[i] / (1.0f + std::exp(-gu[i])) * gu[inter + i];
  matvec(down.ptr<float>() + e * hidden * inter, act.data(), hidden, inter, y);
}
}  // namespace

void moe_pack(Tensor x, Tensor topk_ids, int experts_per_rank, Tensor send_x, Tensor send_expert,
              Tensor origin) {
  const int64_t tokens = x.dim(0), hidden = x.dim(1), k = topk_ids.dim(1);
  const int64_t peers = send_x.dim(0), cap = send_x.dim(1);
  std::vector<int64_t> fill(peers, 0);
  std::fill(send_expert.ptr<int32_t>(), send_expert.ptr<int32_t>() + peers * cap, -1);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = topk_ids.ptr<int32_t>()[t * k + j];
      const int64_t p = e / experts_per_rank;
      TPS_CHECK(p < peers && fill[p] < cap, "moe_pack: expert ", e, " overflows the dispatch buffer");
      const int64_t n = fill[p]++;
      std::copy_n(x.ptr<float>() + t * hidden, hidden, send_x.ptr<float>() + (p * cap + n) * hidden);
      send_expert.ptr<int32_t>()[p * cap + n] = static_cast<int32_t>(e - p * experts_per_rank);
      origin.ptr<int32_t>()[t * k + j] = static_cast<int32_t>(p * cap + n);
    }
}

void moe_experts_rows(Tensor rows, Tensor expert_ids, Tensor gate_up, Tensor down, Tensor out) {
  const int64_t n = rows.dim(0), hidden = rows.dim(1), inter = gate_up.dim(1) / 2;
  std::vector<float> gu(2 * inter), act(inter);
  for (int64_t r = 0; r < n; ++r) {
    const int32_t e = expert_ids.ptr<int32_t>()[r];
    if (e < 0) continue;
    TPS_CHECK(e < gate_up.dim(0), "moe_experts_rows: local expert ", e, " of ", gate_up.dim(0));
    expert_mlp(rows.ptr<float>() + r * hidden, gate_up, down, e, gu, act, out.ptr<float>() + r * hidden);
  }
}

void moe_combine(Tensor results, Tensor origin, Tensor topk_weights, Tensor out) {
  const int64_t tokens = out.dim(0), hidden = out.dim(1), k = origin.dim(1);
  for (int64_t t = 0; t < tokens; ++t) {
    float* o = out.ptr<float>() + t * hidden;
    std::fill(o, o + hidden, 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const float* r = results.ptr<float>() + static_cast<int64_t>(origin.ptr<int32_t>()[t * k + j]) * hidden;
      const float w = topk_weights.ptr<float>()[t * k + j];
      for (int64_t i = 0; i < hidden; ++i) o[i] += w * r[i];
    }
  }
}

void moe_experts(Tensor x, Tensor gate_up, Tensor down, Tensor topk_ids, Tensor topk_weights,
                 int expert_begin, Tensor out) {
  const int64_t tokens = x.dim(0), hidden = x.dim(1);
  const int64_t local_experts = gate_up.dim(0), inter = gate_up.dim(1) / 2;
  const int64_t k = topk_ids.dim(1);
  TPS_CHECK(gate_up.dim(2) == hidden && down.dim(1) == hidden && down.dim(2) == inter,
            "moe_experts: gate_up ", gate_up.shape_string(), " down ", down.shape_string(), " hidden ",
            hidden);
  std::vector<float> gu(2 * inter), act(inter), y(hidden);
  for (int64_t t = 0; t < tokens; ++t) {
    float* o = out.ptr<float>() + t * hidden;
    std::fill(o, o + hidden, 0.0f);
    const float* xt = x.ptr<float>() + t * hidden;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = topk_ids.ptr<int32_t>()[t * k + j] - expert_begin;
      if (e < 0 || e >= local_experts) continue;  // held by another rank
      expert_mlp(xt, gate_up, down, e, gu, act, y.data());
      const float w = topk_weights.ptr<float>()[t * k + j];
      for (int64_t i = 0; i < hidden; ++i) o[i] += w * y[i];
    }
  }
}

}  // namespace tpserve::cpu
