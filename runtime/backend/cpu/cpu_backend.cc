// The CPU reference backend: plain loops, float32 math and float32 storage (bf16 checkpoints are widened
// exactly), deterministic. It is the oracle for the CUDA kernels and runs the model where there is no GPU.
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/backend/cpu/cpu_ops.h"

namespace tpserve {
namespace {

void expect_f32(const Tensor& t, const char* what) {
  TPS_CHECK(t.dtype == DType::kF32 && t.device == Device::kCpu, what, " must be a host f32 tensor, got ",
            t.shape_string());
}

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  Device device() const override { return Device::kCpu; }
  DType weight_dtype() const override { return DType::kF32; }
  DType activation_dtype() const override { return DType::kF32; }

  Tensor alloc(DType dtype, std::initializer_list<int64_t> shape) override {
    Tensor t(nullptr, dtype, Device::kCpu, shape);
    const size_t bytes = std::max<size_t>(t.nbytes(), 1);
    // 64-byte aligned, zero-initialised.
    auto* mem = static_cast<char*>(::operator new[](bytes, std::align_val_t{64}));
    std::memset(mem, 0, bytes);
    blocks_.emplace_back(mem);
    allocated_ += bytes;
    t.data = mem;
    return t;
  }
  void copy_from_host(Tensor dst, const void* src) override { std::memcpy(dst.data, src, dst.nbytes()); }
  void copy_to_host(void* dst, Tensor src) override { std::memcpy(dst, src.data, src.nbytes()); }
  void zero(Tensor t) override { std::memset(t.data, 0, t.nbytes()); }
  void synchronize() override {}
  size_t allocated_bytes() const override { return allocated_; }

  void embedding(Tensor ids, Tensor table, int64_t vocab_begin, Tensor out) override {
    expect_f32(table, "embedding table");
    const int64_t h = table.dim(1), v = table.dim(0);
    for (int64_t t = 0; t < ids.dim(0); ++t) {
      const int64_t row = ids.ptr<int32_t>()[t] - vocab_begin;
      float* o = out.ptr<float>() + t * h;
      if (row >= 0 && row < v)
        std::memcpy(o, table.ptr<float>() + row * h, h * sizeof(float));
      else
        std::memset(o, 0, h * sizeof(float));
    }
  }

  void rmsnorm(Tensor x, Tensor w, float eps, Tensor out) override {
    const int h = static_cast<int>(x.dim(-1));
    for (int64_t t = 0; t < x.numel() / h; ++t)
      cpu::rmsnorm_row(x.ptr<float>() + t * h, w.ptr<float>(), eps, h, out.ptr<float>() + t * h);
  }

  void add_rmsnorm(Tensor residual, Tensor x, Tensor w, float eps, Tensor out) override {
    add(residual, x);
    rmsnorm(residual, w, eps, out);
  }

  void add(Tensor inout, Tensor x) override {
    float* a = inout.ptr<float>();
    const float* b = x.ptr<float>();
    for (int64_t i = 0; i < inout.numel(); ++i) a[i] += b[i];
  }

  void linear(Tensor x, Tensor w, Tensor out) override {
    expect_f32(w, "linear weight");
    const int64_t n = w.dim(0), k = w.dim(1);
    TPS_CHECK(x.dim(-1) == k && out.dim(-1) == n, "linear: x ", x.shape_string(), " w ", w.shape_string(),
              " out ", out.shape_string());
    for (int64_t t = 0; t < x.numel() / k; ++t)
      cpu::matvec(w.ptr<float>(), x.ptr<float>() + t * k, n, k, out.ptr<float>() + t * n);
  }

  void qk_norm_rope_kv(Tensor qkv, int num_q_heads, int num_kv_heads, Tensor q_norm_w, Tensor k_norm_w,
                       float eps, const RopeConfig& rope, const AttentionMeta& meta, KvCacheLayer cache,
                       Tensor q_out) override {
    cpu::qk_norm_rope_kv(qkv, num_q_heads, num_kv_heads, q_norm_w, k_norm_w, eps, rope, meta, cache, q_out);
  }
  void attention(Tensor q, int num_q_heads, int num_kv_heads, float scale, KvCacheLayer cache,
                 const AttentionMeta& meta, Tensor out) override {
    cpu::attention(q, num_q_heads, num_kv_heads, scale, cache, meta, out);
  }
  void topk_gating(Tensor router_logits, int k, bool renormalize, Tensor weights, Tensor ids) override {
    cpu::topk_gating(router_logits, k, renormalize, weights, ids);
  }
  void moe_experts(Tensor x, Tensor gate_up, Tensor down, Tensor topk_ids, Tensor topk_weights,
                   int expert_begin, Tensor out) override {
    cpu::moe_experts(x, gate_up, down, topk_ids, topk_weights, expert_begin, out);
  }

  void moe_pack(Tensor x, Tensor topk_ids, int experts_per_rank, Tensor send_x, Tensor send_expert,
                Tensor origin) override {
    cpu::moe_pack(x, topk_ids, experts_per_rank, send_x, send_expert, origin);
  }
  void moe_experts_rows(Tensor rows, Tensor expert_ids, Tensor gate_up, Tensor down, Tensor out) override {
    cpu::moe_experts_rows(rows, expert_ids, gate_up, down, out);
  }
  void moe_combine(Tensor results, Tensor origin, Tensor topk_weights, Tensor out) override {
    cpu::moe_combine(results, origin, topk_weights, out);
  }

  void silu_mul(Tensor gate_up, Tensor out) override {
    const int64_t inter = out.dim(-1);
    for (int64_t t = 0; t < out.numel() / inter; ++t) {
      const float* g = gate_up.ptr<float>() + t * 2 * inter;
      float* o = out.ptr<float>() + t * inter;
      for (int64_t i = 0; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * g[inter + i];
    }
  }

  void gather_rows(Tensor x, Tensor rows, Tensor out) override {
    const size_t row_bytes = static_cast<size_t>(x.row_numel()) * dtype_size(x.dtype);
    for (int64_t r = 0; r < rows.dim(0); ++r) {
      const int32_t src = rows.ptr<int32_t>()[r];
      TPS_CHECK(src >= 0 && src < x.dim(0), "gather_rows: row ", src, " of ", x.shape_string());
      std::memcpy(static_cast<char*>(out.data) + r * row_bytes,
                  static_cast<const char*>(x.data) + src * row_bytes, row_bytes);
    }
  }

  void sampling_candidates(Tensor logits, int64_t vocab_begin, Tensor temperature, Tensor values, Tensor ids,
                           Tensor stats) override {
    cpu::sampling_candidates(logits, vocab_begin, temperature, values, ids, stats);
  }
  void sample(Tensor values, Tensor ids, Tensor stats, const SamplingInputs& params, Tensor tokens) override {
    cpu::sample(values, ids, stats, params, tokens);
  }
  void verify_and_sample(Tensor values, Tensor ids, Tensor stats, const SamplingInputs& params,
                         Tensor row_tokens, Tensor group_start, Tensor emitted, Tensor accepted) override {
    cpu::verify_and_sample(values, ids, stats, params, row_tokens, group_start, emitted, accepted);
  }
  void adjust_logits(Tensor logits, int64_t vocab_begin, Tensor targets, Tensor values) override {
    cpu::adjust_logits(logits, vocab_begin, targets, values);
  }
  void mask_logits(Tensor logits, int64_t vocab_begin, Tensor rows, Tensor masks) override {
    cpu::mask_logits(logits, vocab_begin, rows, masks);
  }
  void resolve_tokens(Tensor ids, Tensor table) override {
    int32_t* v = ids.ptr<int32_t>();
    for (int64_t i = 0; i < ids.numel(); ++i) {
      if (v[i] >= 0) continue;
      const int64_t t = -static_cast<int64_t>(v[i]) - 1;
      TPS_CHECK(t < table.numel(), "resolve_tokens: entry ", t, " of a table of ", table.numel());
      v[i] = table.ptr<int32_t>()[t];
    }
  }
  void add_i32(Tensor a, Tensor b, int32_t c, Tensor out) override {
    for (int64_t i = 0; i < out.numel(); ++i)
      out.ptr<int32_t>()[i] = a.ptr<int32_t>()[i] + b.ptr<int32_t>()[i] + c;
  }
  void scatter_i32(Tensor values, Tensor index, Tensor table) override {
    for (int64_t i = 0; i < values.numel(); ++i) {
      const int32_t at = index.ptr<int32_t>()[i];
      TPS_CHECK(at >= 0 && at < table.numel(), "scatter_i32: index ", at, " of ", table.numel());
      table.ptr<int32_t>()[at] = values.ptr<int32_t>()[i];
    }
  }
  void draft_step_meta(Tensor positions, Tensor block_tables, int block_size, Tensor slot_mapping,
                       Tensor context_lens) override {
    const int64_t width = block_tables.dim(1);
    for (int64_t g = 0; g < positions.numel(); ++g) {
      const int32_t p = positions.ptr<int32_t>()[g];
      TPS_CHECK(p / block_size < width, "draft position ", p, " beyond the block table");
      slot_mapping.ptr<int32_t>()[g] =
          block_tables.ptr<int32_t>()[g * width + p / block_size] * block_size + p % block_size;
      context_lens.ptr<int32_t>()[g] = p + 1;
    }
  }

 private:
  struct AlignedDelete {
    void operator()(char* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::vector<std::unique_ptr<char, AlignedDelete>> blocks_;
  size_t allocated_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

}  // namespace tpserve
