// Synthetic weights generated on the device (Backend::fill_synthetic, kernels/synthetic_fill) give the bits
// the host generator reads, for whole tensors and for the slices ranks load (row ranges, column ranges,
// odd sizes). The parameter mapping is also checked on the host, without a GPU.
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/synthetic_fill.h"
#include "runtime/model/model_spec.h"
#include "runtime/weights/synthetic_weights.h"
#include "tests/cuda/op_test_util.h"

namespace tpserve::cuda_test {
namespace {

struct Case {
  std::string name;
  std::vector<Range> ranges;
};

std::vector<Case> cases(const SyntheticWeights& w) {
  const std::string q = "model.layers.1.self_attn.q_proj.weight",
                    o = "model.layers.0.self_attn.o_proj.weight";
  const auto qs = w.meta(q).shape, os = w.meta(o).shape;
  const int64_t vocab = w.meta("model.embed_tokens.weight").shape[0];
  return {
      {"model.norm.weight", {{0, w.meta("model.norm.weight").shape[0]}}},
      {"model.layers.0.input_layernorm.weight", {{3, 40}}},
      {q, {{0, qs[0]}, {0, qs[1]}}},
      {q, {{qs[0] / 2, qs[0]}, {0, qs[1]}}},      // rows: a column-parallel shard
      {o, {{0, os[0]}, {os[1] / 4, os[1] / 2}}},  // columns: a row-parallel shard
      {o, {{5, 18}, {7, 38}}},                    // odd both ways
      {"model.embed_tokens.weight", {{vocab - 77, vocab}, {0, 64}}},
      {"model.layers.1.mlp.experts.5.down_proj.weight", {{0, 64}, {0, 32}}},
  };
}

std::vector<uint16_t> host_bits(const SyntheticWeights& w, const Case& c) {
  int64_t n = 1;
  for (const Range& r : c.ranges) n *= r.size();
  std::vector<uint16_t> bits(static_cast<size_t>(n));
  w.read(c.name, c.ranges, DType::kBF16, bits.data());
  return bits;
}

TEST(SyntheticFill, ParamsMapTheSliceLikeTheHostReader) {  // no GPU needed
  const SyntheticWeights w(preset_model_spec("tiny", 2, 4096), 9);
  for (const Case& c : cases(w)) {
    SCOPED_TRACE(c.name);
    const std::optional<SyntheticSlice> slice = w.synthetic_slice(c.name, c.ranges);
    ASSERT_TRUE(slice.has_value());
    const kernels::SyntheticFillParams p = kernels::make_synthetic_fill_params(nullptr, *slice);
    const std::vector<uint16_t> want = host_bits(w, c);
    ASSERT_EQ(p.slice.numel(), static_cast<int64_t>(want.size()));
    for (int64_t j = 0; j < p.slice.numel(); ++j) {  // the kernel's index arithmetic, on the host
      const int64_t i2 = j % p.slice.size[2], r = j / p.slice.size[2];
      const int64_t i1 = r % p.slice.size[1], i0 = r / p.slice.size[1];
      const int64_t src = (p.slice.begin[0] + i0) * p.stride[0] + (p.slice.begin[1] + i1) * p.stride[1] +
                          (p.slice.begin[2] + i2) * p.stride[2];
      ASSERT_EQ(f32_to_bf16(synthetic_value(p.slice.key, p.slice.offset, p.slice.scale, src)), want[j]) << j;
    }
  }
  EXPECT_THROW(w.synthetic_slice("model.norm.weight", std::vector<Range>{{0, 1 << 20}}), Error);
}

TEST(SyntheticFill, DeviceBitsEqualTheHostReader) {
  TPS_REQUIRE_CUDA_DEVICE();
  Backends b;
  const SyntheticWeights w(preset_model_spec("tiny", 2, 4096), 9);
  for (const Case& c : cases(w)) {
    SCOPED_TRACE(c.name);
    const std::vector<uint16_t> want = host_bits(w, c);
    Tensor t = b.gpu().alloc(DType::kBF16, {static_cast<int64_t>(want.size())});
    ASSERT_TRUE(b.gpu().fill_synthetic(t, *w.synthetic_slice(c.name, c.ranges)));
    std::vector<uint16_t> got(want.size());
    b.gpu().copy_to_host(got.data(), t);
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i)
      if (got[i] != want[i] && bad++ < 3)
        ADD_FAILURE() << "element " << i << ": " << got[i] << " vs " << want[i];
    EXPECT_EQ(bad, 0u);
  }
}

}  // namespace
}  // namespace tpserve::cuda_test
