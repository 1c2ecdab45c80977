// CPU reference for q/k RMSNorm + RoPE + paged-KV append, and for causal attention over the paged cache.
#include <cmath>
#include <vector>

#include "runtime/backend/cpu/cpu_ops.h"

namespace tpserve::cpu {
namespace {

// Neox-style rotation of one head in place: pairs (i, i + D/2), inv_freq_i = theta^(-2i/D), in float32 as
// Hugging Face computes it.
void rope_head(float* x, int d, int position, double theta) {
  const int half = d / 2;
  for (int i = 0; i < half; ++i) {
    const float inv_freq =
        1.0f / std::pow(static_cast<float>(theta), static_cast<float>(2 * i) / static_cast<float>(d));
    const float angle = static_cast<float>(position) * inv_freq;
    const float c = std::cos(angle), s = std::sin(angle);
    const float x1 = x[i], x2 = x[i + half];
    x[i] = x1 * c - x2 * s;
    x[i + half] = x2 * c + x1 * s;
  }
}

}  // namespace

void qk_norm_rope_kv(Tensor qkv, int num_q_heads, int num_kv_heads, Tensor q_norm_w, Tensor k_norm_w,
                     float eps, const RopeConfig& rope, const AttentionMeta& meta, KvCacheLayer cache,
                     Tensor q_out) {
  const int d = rope.head_dim;
  const int64_t tokens = qkv.dim(0);
  const int64_t width = static_cast<int64_t>(num_q_heads + 2 * num_kv_heads) * d;
  TPS_CHECK(qkv.dim(1) == width, "qkv width ", qkv.dim(1), " != ", width);
  const int64_t block_size = cache.k.dim(1);
  std::vector<float> head(d);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = qkv.ptr<float>() + t * width;
    const int pos = meta.positions.ptr<int32_t>()[t];
    for (int h = 0; h < num_q_heads; ++h) {
      float* q = q_out.ptr<float>() + (t * num_q_heads + h) * d;
      rmsnorm_row(row + h * d, q_norm_w.ptr<float>(), eps, d, q);
      rope_head(q, d, pos, rope.theta);
    }
    const int64_t slot = meta.slot_mapping.ptr<int32_t>()[t];
    if (slot < 0) continue;  // padding row
    TPS_CHECK(slot < cache.k.dim(0) * block_size, "KV slot ", slot, " of token ", t, " beyond the cache's ",
              cache.k.dim(0), " blocks of ", block_size);
    const int64_t block = slot / block_size, offset = slot % block_size;
    for (int h = 0; h < num_kv_heads; ++h) {
      const int64_t cache_index = ((block * block_size + offset) * num_kv_heads + h) * d;
      float* k = cache.k.ptr<float>() + cache_index;
      rmsnorm_row(row + (num_q_heads + h) * d, k_norm_w.ptr<float>(), eps, d, k);
      rope_head(k, d, pos, rope.theta);
      const float* v = row + (num_q_heads + num_kv_heads + h) * d;
      std::copy(v, v + d, cache.v.ptr<float>() + cache_index);
    }
  }
}

void attention(Tensor q, int num_q_heads, int num_kv_heads, float scale, KvCacheLayer cache,
               const AttentionMeta& meta, Tensor out) {
  const int64_t block_size = cache.k.dim(1);
  const int d = static_cast<int>(cache.k.dim(3));
  const int group = num_q_heads / num_kv_heads;
  const int64_t max_blocks = meta.block_tables.dim(1);
  const int32_t* qs = meta.query_start.ptr<int32_t>();
  std::vector<float> scores;
  for (int s = 0; s < meta.num_seqs; ++s) {
    const int32_t* table = meta.block_tables.ptr<int32_t>() + s * max_blocks;
    for (int32_t t = qs[s]; t < qs[s + 1]; ++t) {
      const int pos = meta.positions.ptr<int32_t>()[t];
      const int n = pos + 1;  // causal: keys 0..pos
      TPS_CHECK(n <= meta.context_lens.ptr<int32_t>()[s], "attention: position ", pos,
                " beyond context length ", meta.context_lens.ptr<int32_t>()[s]);
      scores.resize(n);
      for (int h = 0; h < num_q_heads; ++h) {
        const float* qh = q.ptr<float>() + (static_cast<int64_t>(t) * num_q_heads + h) * d;
        const int kvh = h / group;
        float max_score = -INFINITY;
        for (int j = 0; j < n; ++j) {
          const int64_t slot = static_cast<int64_t>(table[j / block_size]) * block_size + j % block_size;
          const float* k = cache.k.ptr<float>() + (slot * num_kv_heads + kvh) * d;
          float dot = 0.0f;
          for (int i = 0; i < d; ++i) dot += qh[i] * k[i];
          scores[j] = dot * scale;
          max_score = std::max(max_score, scores[j]);
        }
        float denom = 0.0f;
        for (int j = 0; j < n; ++j) denom += (scores[j] = std::exp(scores[j] - max_score));
        float* o = out.ptr<float>() + (static_cast<int64_t>(t) * num_q_heads + h) * d;
        std::fill(o, o + d, 0.0f);
        for (int j = 0; j < n; ++j) {
          const int64_t slot = static_cast<int64_t>(table[j / block_size]) * block_size + j % block_size;
          const float* v = cache.v.ptr<float>() + (slot * num_kv_heads + kvh) * d;
          const float p = scores[j] / denom;
          for (int i = 0; i < d; ++i) o[i] += p * v[i];
        }
      }
    }
  }
}

}  // namespace tpserve::cpu
