// CUDA linear (GEMV for small M, cuBLASLt above) against the CPU reference, bf16 and f32 outputs; and
// norm_linear (the RMSNorm inside the GEMV). Both with the staged GEMV (weights in shared memory, where they
// fit) and without it.
#include <gtest/gtest.h>

#include "common/dtype.h"
#include "tests/cuda/op_test_util.h"

namespace tpserve::cuda_test {
namespace {

struct LinearCase {
  int m, n, k;
};
void PrintTo(const LinearCase& c, std::ostream* os) {
  *os << "M" << c.m << " N" << c.n << " K" << c.k;
}

class LinearTest : public ::testing::TestWithParam<std::tuple<LinearCase, bool, bool>> {};

TEST_P(LinearTest, MatchesCpu) {
  TPS_REQUIRE_CUDA_DEVICE();
  const auto [c, out_f32, staged] = GetParam();
  std::mt19937 rng(c.m * 1000003 + c.n * 1009 + c.k + (out_f32 ? 7 : 0) + (staged ? 11 : 0));
  Backends b(size_t(1) << 30, size_t(256) << 20, staged);
  auto xv = uniform(rng, size_t(c.m) * c.k), wv = uniform(rng, size_t(c.n) * c.k, -0.5f, 0.5f);
  Pair x = b.bf16({c.m, c.k}, xv), w = b.bf16({c.n, c.k}, wv);
  Pair out = b.output(out_f32 ? DType::kF32 : DType::kBF16, {c.m, c.n});
  b.cpu().linear(x.cpu, w.cpu, out.cpu);
  b.gpu().linear(x.gpu, w.gpu, out.gpu);
  const auto ref = cpu_floats(out.cpu);
  // fp32 accumulation in another order: tiny absolute error; bf16 output adds a relative 2^-9.
  const float scale = rms(ref);
  const Tolerance tol = out_f32 ? Tolerance{1e-4f * scale + 1e-5f, 1e-4f} : Tolerance{2e-3f * scale, 8e-3f};
  expect_close("linear M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k),
               ref, b.floats(out.gpu), tol);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LinearTest,
    ::testing::Combine(::testing::Values(LinearCase{1, 96, 96}, LinearCase{3, 130, 96},
                                         LinearCase{8, 1000, 2048}, LinearCase{9, 200, 2048},
                                         LinearCase{16, 2048, 4096}, LinearCase{17, 520, 2048},
                                         LinearCase{64, 384, 96}, LinearCase{1, 5120, 2048},
                                         LinearCase{2, 4099, 264}, LinearCase{1, 2048, 4096},
                                         LinearCase{5, 128, 2048}, LinearCase{16, 2056, 96},
                                         LinearCase{2, 4100, 64}),
                       ::testing::Bool(), ::testing::Bool()),
    [](const auto& test) {
      const LinearCase& c = std::get<0>(test.param);
      return "M" + std::to_string(c.m) + "N" + std::to_string(c.n) + "K" + std::to_string(c.k) +
             (std::get<1>(test.param) ? "_f32" : "_bf16") + (std::get<2>(test.param) ? "_staged" : "");
    });

// Repeated shapes reuse the cached cuBLASLt plan and give the same result.
TEST(Linear, CublasPlanReuseIsDeterministic) {
  TPS_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(77);
  Backends b;
  auto xv = uniform(rng, 40 * 256), wv = uniform(rng, 300 * 256);
  Pair x = b.bf16({40, 256}, xv), w = b.bf16({300, 256}, wv);
  Pair out = b.output(DType::kF32, {40, 300});
  b.gpu().linear(x.gpu, w.gpu, out.gpu);
  const auto first = b.floats(out.gpu);
  b.poison(out.gpu);
  b.gpu().linear(x.gpu, w.gpu, out.gpu);
  expect_close("second run", first, b.floats(out.gpu), {0.0f, 0.0f});
}

// norm_linear: at <= 8 rows the CUDA backend computes the RMSNorm (with or without the residual add) inside
// the GEMV; above, rmsnorm then cuBLASLt. Against the CPU's rmsnorm / add_rmsnorm + linear, on fresh inputs
// each round, eagerly and replayed from a captured graph (the fused kernel's arrival counter must be back to
// zero after every launch, or a round's normed rows and residual are not written and stay poisoned).
struct NormLinearCase {
  int m, n, k;
  bool add, out_f32;
};
void PrintTo(const NormLinearCase& c, std::ostream* os) {
  *os << "M" << c.m << " N" << c.n << " K" << c.k << (c.add ? " add" : "") << (c.out_f32 ? " f32" : " bf16");
}

std::vector<uint16_t> to_bf16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = f32_to_bf16(v[i]);
  return bits;
}

class NormLinearTest : public ::testing::TestWithParam<std::tuple<NormLinearCase, bool>> {};

TEST_P(NormLinearTest, MatchesCpuEagerAndReplayed) {
  TPS_REQUIRE_CUDA_DEVICE();
  const auto [c, staged] = GetParam();
  std::mt19937 rng(c.m * 7919 + c.n * 31 + c.k + (c.add ? 3 : 0) + (c.out_f32 ? 5 : 0) + (staged ? 13 : 0));
  Backends b(size_t(1) << 30, size_t(256) << 20, staged);
  const float eps = 1e-6f;
  const int n2 = 64;  // a second product on the updated residual (the next layer's QKV after the router)
  auto wv = uniform(rng, size_t(c.n) * c.k, -0.5f, 0.5f), nwv = uniform(rng, size_t(c.k), 0.5f, 1.5f);
  auto w2v = uniform(rng, size_t(n2) * c.k, -0.5f, 0.5f);
  Pair w = b.bf16({c.n, c.k}, wv), norm_w = b.bf16({c.k}, nwv), w2 = b.bf16({n2, c.k}, w2v);
  Pair residual = b.output(DType::kBF16, {c.m, c.k}), add = b.output(DType::kBF16, {c.m, c.k});
  Pair normed = b.output(DType::kBF16, {c.m, c.k}), normed2 = b.output(DType::kBF16, {c.m, c.k});
  const DType out_dtype = c.out_f32 ? DType::kF32 : DType::kBF16;
  Pair out = b.output(out_dtype, {c.m, c.n}), out2 = b.output(out_dtype, {c.m, n2});
  // Two launches in a row (in the graph: linked by PDL, sharing the arrival counter).
  auto run = [&](Backend& be, bool gpu) {
    auto t = [gpu](Pair& x) { return gpu ? x.gpu : x.cpu; };
    Tensor add_t = t(add);
    be.norm_linear(t(residual), c.add ? &add_t : nullptr, t(norm_w), eps, t(normed), t(w), t(out));
    be.norm_linear(t(residual), nullptr, t(norm_w), eps, t(normed2), t(w2), t(out2));
  };
  // out = normed . w from the GPU's own normed rows (their bf16 values are what its product used).
  auto expect_product = [&](const char* what, Pair& normed_pair, Pair& w_pair, Pair& out_pair, int n) {
    std::vector<float> gpu_normed = b.floats(normed_pair.gpu);
    Pair x = b.bf16({c.m, c.k}, gpu_normed);
    Tensor ref_out = alloc(b.cpu(), DType::kF32, {c.m, n});
    b.cpu().linear(x.cpu, w_pair.cpu, ref_out);
    const auto ref = cpu_floats(ref_out);
    const float scale = rms(ref);
    expect_close(what, ref, b.floats(out_pair.gpu),
                 c.out_f32 ? Tolerance{1e-4f * scale + 1e-5f, 1e-4f} : Tolerance{2e-3f * scale, 8e-3f});
  };
  std::unique_ptr<StepGraph> graph;
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(round < 2 ? "eager round " + std::to_string(round)
                           : "graph replay " + std::to_string(round));
    std::vector<float> rv = uniform(rng, size_t(c.m) * c.k, -2.0f, 2.0f),
                       av = uniform(rng, size_t(c.m) * c.k);
    for (auto* v : {&rv, &av})
      for (float& x : *v) x = bf16_to_f32(f32_to_bf16(x));  // values both backends hold exactly
    b.gpu().copy_from_host(residual.gpu, to_bf16_bits(rv).data());
    b.gpu().copy_from_host(add.gpu, to_bf16_bits(av).data());
    b.cpu().copy_from_host(residual.cpu, rv.data());
    b.cpu().copy_from_host(add.cpu, av.data());
    for (Pair* p : {&normed, &normed2, &out, &out2}) b.poison(p->gpu);
    if (round < 2) {
      run(b.gpu(), true);
    } else {
      if (!graph) graph = b.gpu().capture([&] { run(b.gpu(), true); });
      graph->replay();
    }
    run(b.cpu(), false);
    // The norm's sum runs in another order and the GPU rounds the residual to bf16 (the CPU keeps f32): a
    // normed value may differ by a bf16 rounding or two.
    expect_close("normed", cpu_floats(normed.cpu), b.floats(normed.gpu), {1e-2f, 1.6e-2f});
    expect_close("normed (second)", cpu_floats(normed2.cpu), b.floats(normed2.gpu), {1e-2f, 1.6e-2f});
    if (c.add) expect_close("residual", cpu_floats(residual.cpu), b.floats(residual.gpu), {1e-2f, 4e-3f});
    expect_product("out", normed, w, out, c.n);
    expect_product("out (second)", normed2, w2, out2, n2);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, NormLinearTest,
    ::testing::Combine(
        ::testing::Values(NormLinearCase{1, 5120, 2048, false, false},  // first layer's QKV
                          NormLinearCase{1, 5120, 2048, true, false},   // QKV
                          NormLinearCase{1, 128, 2048, true, true},     // router
                          NormLinearCase{3, 130, 96, true, false}, NormLinearCase{8, 1000, 2048, true, true},
                          NormLinearCase{5, 1000, 4096, true, false},  // > 48 KB static + dynamic
                          NormLinearCase{8, 8320, 2048, true, true},   // 4 warps a block
                          NormLinearCase{7, 200, 264, true, false},
                          NormLinearCase{9, 96, 96, false, true},    // rmsnorm + GEMV
                          NormLinearCase{17, 96, 96, true, false}),  // rmsnorm + cuBLASLt
        ::testing::Bool()));

}  // namespace
}  // namespace tpserve::cuda_test
