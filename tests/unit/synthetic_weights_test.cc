// Tests of SyntheticWeights: determinism, slicing, dtype agreement, per-category statistics against the
// scale scheme in synthetic_weights.h, a forward-ish check on the real 30B shape, errors and speed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <random>

#include "common/error.h"
#include "runtime/model/weight_names.h"
#include "runtime/weights/synthetic_weights.h"

namespace tpserve {
namespace {

// small preset with a short vocabulary, one dense layer and an MTP head: every tensor category appears.
ModelSpec test_spec() {
  ModelSpec s = preset_model_spec("small", 0, 512);
  s.mlp_only_layers = {1};
  s.num_nextn_predict_layers = 1;
  return s;
}

std::vector<Range> full_ranges(const TensorMeta& m) {
  std::vector<Range> r;
  for (int64_t d : m.shape) r.push_back({0, d});
  return r;
}

int64_t count(const std::vector<Range>& ranges) {
  int64_t n = 1;
  for (const Range& r : ranges) n *= std::max<int64_t>(0, r.size());
  return n;
}

std::vector<float> read_f32(const WeightSource& w, const std::string& name,
                            const std::vector<Range>& ranges) {
  std::vector<float> out(count(ranges));
  w.read(name, ranges, DType::kF32, out.data());
  return out;
}

std::vector<float> read_all(const WeightSource& w, const std::string& name) {
  return read_f32(w, name, full_ranges(w.meta(name)));
}

struct Stats {
  double mean = 0, std = 0;
};
Stats stats(const std::vector<float>& v) {
  double s = 0, s2 = 0;
  for (float x : v) s += x, s2 += double(x) * x;
  Stats st;
  st.mean = s / v.size();
  st.std = std::sqrt(std::max(0.0, s2 / v.size() - st.mean * st.mean));
  return st;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

TEST(SyntheticWeights, SameSeedSameValuesOtherSeedOrNameDiffers) {
  const ModelSpec spec = test_spec();
  const SyntheticWeights a(spec, 7), b(spec, 7), c(spec, 8);
  const std::string q0 = "model.layers.0.self_attn.q_proj.weight",
                    q1 = "model.layers.1.self_attn.q_proj.weight";
  const std::vector<float> va = read_all(a, q0), vb = read_all(b, q0), vc = read_all(c, q0),
                           v1 = read_all(a, q1);
  EXPECT_EQ(va, vb);
  int64_t same_seed = 0, same_name = 0;
  for (size_t i = 0; i < va.size(); ++i) same_seed += va[i] == vc[i], same_name += va[i] == v1[i];
  // bf16 values collide now and then; independent streams agree on well under 5% of elements.
  EXPECT_LT(same_seed, int64_t(va.size() / 20));
  EXPECT_LT(same_name, int64_t(va.size() / 20));
}

TEST(SyntheticWeights, SlicedReadsMatchTheFullRead) {
  const SyntheticWeights w(test_spec(), 3);
  const std::string name = "model.layers.2.mlp.experts.5.down_proj.weight";  // [256, 128]
  const std::vector<float> full = read_all(w, name);
  const int64_t cols = w.meta(name).shape[1];
  const std::vector<std::vector<Range>> slices = {
      {{3, 17}, {0, cols}}, {{0, 256}, {5, 40}}, {{100, 101}, {127, 128}}, {{250, 256}, {64, 128}}};
  for (const auto& s : slices) {
    const std::vector<float> part = read_f32(w, name, s);
    int64_t k = 0;
    for (int64_t r = s[0].begin; r < s[0].end; ++r)
      for (int64_t c = s[1].begin; c < s[1].end; ++c, ++k)
        ASSERT_EQ(part[k], full[r * cols + c]) << "row " << r << " col " << c;
  }
  const std::vector<float> norm = read_all(w, "model.norm.weight");
  const std::vector<float> norm_part = read_f32(w, "model.norm.weight", {{10, 20}});
  EXPECT_EQ(norm_part, std::vector<float>(norm.begin() + 10, norm.begin() + 20));
  // Empty ranges are valid and write nothing.
  w.read(name, std::vector<Range>{{4, 4}, {0, cols}}, DType::kF32, nullptr);
}

TEST(SyntheticWeights, ThreadedColumnSliceOfALargeTensorMatchesTheFullRead) {
  const SyntheticWeights w(preset_model_spec("qwen3-30b-a3b"), 11);
  const std::string name = "model.layers.47.self_attn.q_proj.weight";  // [4096, 2048]: threaded reads
  const std::vector<float> full = read_all(w, name);
  const std::vector<Range> cols = {{0, 4096}, {1000, 1500}};
  const std::vector<float> part = read_f32(w, name, cols);
  int64_t mismatches = 0;
  for (int64_t r = 0; r < 4096; ++r)
    for (int64_t c = 0; c < 500; ++c) mismatches += part[r * 500 + c] != full[r * 2048 + 1000 + c];
  EXPECT_EQ(mismatches, 0);
}

TEST(SyntheticWeights, F32ReadIsTheBf16ReadWidened) {
  const SyntheticWeights w(test_spec(), 5);
  for (const std::string name : {"model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
                                 "mtp.fc.weight", "lm_head.weight"}) {
    const TensorMeta m = w.meta(name);
    EXPECT_EQ(m.dtype, DType::kBF16);
    std::vector<uint16_t> bits(m.numel());
    w.read(name, full_ranges(m), DType::kBF16, bits.data());
    const std::vector<float> f = read_all(w, name);
    for (size_t i = 0; i < f.size(); ++i) ASSERT_EQ(f[i], bf16_to_f32(bits[i])) << name << " [" << i << "]";
  }
}

TEST(SyntheticWeights, StatisticsFollowTheScaleScheme) {
  const ModelSpec spec = test_spec();
  const SyntheticWeights w(spec, 1);
  const double h = spec.hidden_size, l = spec.num_layers, out_scale = 1.0 / std::sqrt(2.0 * l);
  // Intended standard deviation: scale / sqrt(3) for scale * u, u uniform in [-1, 1).
  auto linear = [](double in) { return 1.0 / std::sqrt(in); };
  struct Case {
    std::string name;
    double mean, std;
  };
  const std::vector<Case> cases = {
      {"model.embed_tokens.weight", 0, 1.0},
      {"model.layers.0.self_attn.q_proj.weight", 0, linear(h)},
      {"model.layers.0.self_attn.k_proj.weight", 0, linear(h)},
      {"model.layers.0.self_attn.o_proj.weight", 0, linear(spec.q_size()) * out_scale},
      {"model.layers.0.mlp.gate.weight", 0, 4 * linear(h)},
      {"model.layers.0.mlp.experts.3.up_proj.weight", 0, linear(h)},
      {"model.layers.0.mlp.experts.3.down_proj.weight", 0, linear(spec.moe_intermediate_size) * out_scale},
      {"model.layers.1.mlp.gate_proj.weight", 0, linear(h)},
      {"model.layers.1.mlp.down_proj.weight", 0, linear(spec.intermediate_size) * out_scale},
      {"lm_head.weight", 0, 2 * linear(h)},
      {"mtp.fc.weight", 0, linear(2 * h)},
      {"mtp.layers.0.self_attn.o_proj.weight", 0, linear(spec.q_size()) * out_scale},
      {"model.layers.0.input_layernorm.weight", 1, 0.1 / std::sqrt(3.0)},
      {"model.layers.2.post_attention_layernorm.weight", 1, 0.1 / std::sqrt(3.0)},
      {"model.layers.0.self_attn.q_norm.weight", 1, 0.1 / std::sqrt(3.0)},
      {"model.norm.weight", 1, 0.1 / std::sqrt(3.0)},
      {"mtp.pre_fc_norm_embedding.weight", 1, 0.1 / std::sqrt(3.0)},
      {"mtp.norm.weight", 1, 0.1 / std::sqrt(3.0)},
  };
  for (const Case& c : cases) {
    const std::vector<float> v = read_all(w, c.name);
    const Stats s = stats(v);
    EXPECT_NEAR(s.mean, c.mean, 5 * c.std / std::sqrt(double(v.size())) + 1e-3) << c.name;
    EXPECT_NEAR(s.std / c.std, 1.0, 0.2) << c.name;
    // Bounded (uniform, no outliers), up to bf16 rounding (8 significant bits).
    const double bound = std::sqrt(3.0) * c.std * 1.01 + std::abs(c.mean) / 128;
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    EXPECT_LE(*hi - c.mean, bound) << c.name;
    EXPECT_GE(*lo - c.mean, -bound) << c.name;
  }
}

TEST(SyntheticWeights, RealShapeIsCheapAndProjectionsKeepUnitVariance) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelSpec spec = preset_model_spec("qwen3-30b-a3b");
  const SyntheticWeights w(spec, 42);
  EXPECT_LT(ms_since(t0), 2000.0) << "constructing the 30B spec must not touch the weights";
  EXPECT_EQ(w.names().size(), expected_tensors(spec, ExpertLayout::kPerExpert).size());
  EXPECT_NE(w.describe().find("seed 42"), std::string::npos) << w.describe();

  // y = W x for unit-variance x: std(y) ~ 1 for q_proj, ~1/sqrt(2L) for o_proj.
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  auto out_std = [&](const std::string& name) {
    const std::vector<float> wt = read_all(w, name);
    const int64_t out = w.meta(name).shape[0], in = w.meta(name).shape[1];
    std::vector<float> y;
    for (int t = 0; t < 4; ++t) {
      std::vector<float> x(in);
      for (float& v : x) v = normal(rng);
      for (int64_t o = 0; o < out; ++o) {
        double acc = 0;
        for (int64_t i = 0; i < in; ++i) acc += double(wt[o * in + i]) * x[i];
        y.push_back(float(acc));
      }
    }
    return stats(y).std;
  };
  EXPECT_NEAR(out_std("model.layers.0.self_attn.q_proj.weight"), 1.0, 0.1);
  EXPECT_NEAR(out_std("model.layers.0.self_attn.o_proj.weight") * std::sqrt(2.0 * spec.num_layers), 1.0, 0.1);

  // Routing is peaky: the mean top-1 softmax probability over tokens is far above uniform (1/128).
  const std::vector<float> gate = read_all(w, "model.layers.0.mlp.gate.weight");
  const int64_t e = spec.num_experts, h = spec.hidden_size;
  double top1 = 0;
  const int tokens = 16;
  for (int t = 0; t < tokens; ++t) {
    std::vector<float> x(h);
    for (float& v : x) v = normal(rng);
    std::vector<double> logit(e);
    for (int64_t j = 0; j < e; ++j)
      for (int64_t i = 0; i < h; ++i) logit[j] += double(gate[j * h + i]) * x[i];
    const double mx = *std::max_element(logit.begin(), logit.end());
    double z = 0;
    for (double v : logit) z += std::exp(v - mx);
    top1 += 1.0 / z / tokens;
  }
  EXPECT_GT(top1, 10.0 / e);
}

TEST(SyntheticWeights, ExpertReadIsFast) {
  const SyntheticWeights w(preset_model_spec("qwen3-30b-a3b"), 9);
  const std::string name = weight_names::expert(17, 99, "gate_proj");
  ASSERT_EQ(w.meta(name).shape, (std::vector<int64_t>{768, 2048}));
  std::vector<uint16_t> out(768 * 2048);
  const auto t0 = std::chrono::steady_clock::now();
  w.read(name, full_ranges(w.meta(name)), DType::kBF16, out.data());
  EXPECT_LT(ms_since(t0), 100.0);
}

TEST(SyntheticWeights, MtpTensorsOnlyWithNextnLayers) {
  ModelSpec spec = test_spec();
  const SyntheticWeights with(spec, 1);
  for (const char* n :
       {"mtp.fc.weight", "mtp.pre_fc_norm_hidden.weight", "mtp.layers.0.self_attn.q_proj.weight",
        "mtp.layers.0.mlp.experts.15.down_proj.weight", "mtp.norm.weight"})
    EXPECT_TRUE(with.has(n)) << n;
  EXPECT_EQ(with.meta("mtp.fc.weight").shape, (std::vector<int64_t>{spec.hidden_size, 2 * spec.hidden_size}));
  spec.num_nextn_predict_layers = 0;
  const SyntheticWeights without(spec, 1);
  for (const std::string& n : without.names()) EXPECT_NE(n.rfind("mtp.", 0), 0u) << n;
  EXPECT_FALSE(without.has("mtp.fc.weight"));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(SyntheticWeights, ErrorsNameTheTensor) {
  const SyntheticWeights w(test_spec(), 1);
  const std::string bogus = "model.layers.0.mlp.experts.99.gate_proj.weight";
  EXPECT_NE(error_of([&] { w.meta(bogus); }).find(bogus), std::string::npos);
  EXPECT_NE(error_of([&] { read_f32(w, bogus, {{0, 1}, {0, 1}}); }).find(bogus), std::string::npos);
  const std::string q = "model.layers.0.self_attn.q_proj.weight";  // [512, 256]
  EXPECT_NE(error_of([&] { read_f32(w, q, {{0, 513}, {0, 256}}); }).find(q), std::string::npos);
  EXPECT_NE(error_of([&] { read_f32(w, q, {{5, 4}, {0, 256}}); }).find("out of bounds"), std::string::npos);
  EXPECT_NE(error_of([&] { read_f32(w, q, {{0, 512}}); }).find(q), std::string::npos);
  std::vector<uint16_t> buf(256);
  EXPECT_NE(error_of([&] {
              w.read(q, std::vector<Range>{{0, 1}, {0, 256}}, DType::kF16, buf.data());
            }).find(q),
            std::string::npos);
  EXPECT_FALSE(w.has(bogus));
}

}  // namespace
}  // namespace tpserve
