// CUDA row ops against the CPU reference: embedding, rmsnorm, add_rmsnorm, add, silu_mul, gather_rows.
#include <gtest/gtest.h>

#include "tests/cuda/op_test_util.h"

namespace tpserve::cuda_test {
namespace {

constexpr Tolerance kBf16Tol{1e-2f, 1e-2f};

class RowOpsTest : public ::testing::TestWithParam<std::tuple<int, int>> {};  // (hidden, tokens)

// A backend whose norms read their weights before the PDL wait or after it (runtime.norm_loads_before_wait).
CudaBackendOptions norm_options(bool loads_before_wait) {
  CudaBackendOptions options = test_backend_options();
  options.kernels.norm_loads_before_wait = loads_before_wait;
  return options;
}

TEST_P(RowOpsTest, Embedding) {
  TPS_REQUIRE_CUDA_DEVICE();
  const auto [hidden, tokens] = GetParam();
  std::mt19937 rng(1000 + hidden * 7 + tokens);
  Backends b;
  const int vocab = 50, vocab_begin = 100;  // this rank holds ids 100..149
  auto table_values = uniform(rng, size_t(vocab) * hidden);
  Pair table = b.bf16({vocab, hidden}, table_values);
  std::vector<int32_t> ids(tokens);
  std::uniform_int_distribution<int> id_dist(80, 170);  // some outside the slice
  for (auto& id : ids) id = id_dist(rng);
  Pair ids_t = b.i32({tokens}, ids);
  Pair out = b.output(DType::kBF16, {tokens, hidden});
  b.cpu().embedding(ids_t.cpu, table.cpu, vocab_begin, out.cpu);
  b.gpu().embedding(ids_t.gpu, table.gpu, vocab_begin, out.gpu);
  expect_close("embedding", cpu_floats(out.cpu), b.floats(out.gpu), {0.0f, 0.0f});
}

TEST_P(RowOpsTest, RmsNorm) {
  TPS_REQUIRE_CUDA_DEVICE();
  const auto [hidden, tokens] = GetParam();
  for (bool early : {true, false}) {
    std::mt19937 rng(2000 + hidden * 7 + tokens + (early ? 1 : 0));
    Backends b(norm_options(early));
    auto xv = uniform(rng, size_t(tokens) * hidden, -3.0f, 3.0f);
    auto wv = uniform(rng, hidden, 0.5f, 1.5f);
    Pair x = b.bf16({tokens, hidden}, xv), w = b.bf16({hidden}, wv);
    Pair out = b.output(DType::kBF16, {tokens, hidden});
    b.cpu().rmsnorm(x.cpu, w.cpu, 1e-6f, out.cpu);
    b.gpu().rmsnorm(x.gpu, w.gpu, 1e-6f, out.gpu);
    expect_close(early ? "rmsnorm (weights before the wait)" : "rmsnorm", cpu_floats(out.cpu),
                 b.floats(out.gpu), kBf16Tol);
  }
}

TEST_P(RowOpsTest, AddRmsNorm) {
  TPS_REQUIRE_CUDA_DEVICE();
  const auto [hidden, tokens] = GetParam();
  for (bool early : {true, false}) {
    std::mt19937 rng(3000 + hidden * 7 + tokens + (early ? 1 : 0));
    Backends b(norm_options(early));
    auto rv = uniform(rng, size_t(tokens) * hidden, -2.0f, 2.0f);
    auto xv = uniform(rng, size_t(tokens) * hidden, -2.0f, 2.0f);
    auto wv = uniform(rng, hidden, 0.5f, 1.5f);
    Pair residual = b.bf16({tokens, hidden}, rv), x = b.bf16({tokens, hidden}, xv), w = b.bf16({hidden}, wv);
    Pair out = b.output(DType::kBF16, {tokens, hidden});
    b.cpu().add_rmsnorm(residual.cpu, x.cpu, w.cpu, 1e-6f, out.cpu);
    b.gpu().add_rmsnorm(residual.gpu, x.gpu, w.gpu, 1e-6f, out.gpu);
    const std::string what = early ? " (weights before the wait)" : "";
    // The GPU keeps the residual in bf16: compare with the bf16 rounding of the CPU's f32 sum.
    expect_close("add_rmsnorm residual" + what, cpu_floats(residual.cpu), b.floats(residual.gpu),
                 {1e-2f, 4e-3f});
    expect_close("add_rmsnorm out" + what, cpu_floats(out.cpu), b.floats(out.gpu), kBf16Tol);
  }
}

TEST_P(RowOpsTest, Add) {
  TPS_REQUIRE_CUDA_DEVICE();
  const auto [hidden, tokens] = GetParam();
  std::mt19937 rng(4000 + hidden * 7 + tokens);
  Backends b;
  auto av = uniform(rng, size_t(tokens) * hidden), xv = uniform(rng, size_t(tokens) * hidden);
  Pair a = b.bf16({tokens, hidden}, av), x = b.bf16({tokens, hidden}, xv);
  b.cpu().add(a.cpu, x.cpu);
  b.gpu().add(a.gpu, x.gpu);
  expect_close("add", cpu_floats(a.cpu), b.floats(a.gpu), {1e-2f, 4e-3f});
}

TEST_P(RowOpsTest, SiluMul) {
  TPS_REQUIRE_CUDA_DEVICE();
  const auto [hidden, tokens] = GetParam();
  std::mt19937 rng(5000 + hidden * 7 + tokens);
  Backends b;
  for (int inter : {hidden, hidden / 2 + 4, 37}) {  // 37: not a multiple of 8 (scalar path)
    auto gv = uniform(rng, size_t(tokens) * 2 * inter, -4.0f, 4.0f);
    Pair gate_up = b.bf16({tokens, 2 * inter}, gv);
    Pair out = b.output(DType::kBF16, {tokens, inter});
    b.cpu().silu_mul(gate_up.cpu, out.cpu);
    b.gpu().silu_mul(gate_up.gpu, out.gpu);
    expect_close("silu_mul I=" + std::to_string(inter), cpu_floats(out.cpu), b.floats(out.gpu), kBf16Tol);
  }
}

TEST_P(RowOpsTest, GatherRows) {
  TPS_REQUIRE_CUDA_DEVICE();
  const auto [hidden, tokens] = GetParam();
  std::mt19937 rng(6000 + hidden * 7 + tokens);
  Backends b;
  auto xv = uniform(rng, size_t(tokens) * hidden);
  Pair x = b.bf16({tokens, hidden}, xv);
  Pair xf = b.f32({tokens, 3}, uniform(rng, size_t(tokens) * 3));  // 12-byte rows: the byte path
  const int r = tokens + 2;
  std::vector<int32_t> rows(r);
  std::uniform_int_distribution<int> dist(0, tokens - 1);
  for (auto& v : rows) v = dist(rng);
  Pair rows_t = b.i32({r}, rows);
  Pair out = b.output(DType::kBF16, {r, hidden}), outf = b.output(DType::kF32, {r, 3});
  b.cpu().gather_rows(x.cpu, rows_t.cpu, out.cpu);
  b.gpu().gather_rows(x.gpu, rows_t.gpu, out.gpu);
  b.cpu().gather_rows(xf.cpu, rows_t.cpu, outf.cpu);
  b.gpu().gather_rows(xf.gpu, rows_t.gpu, outf.gpu);
  expect_close("gather_rows bf16", cpu_floats(out.cpu), b.floats(out.gpu), {0.0f, 0.0f});
  expect_close("gather_rows f32", cpu_floats(outf.cpu), b.floats(outf.gpu), {0.0f, 0.0f});
}

INSTANTIATE_TEST_SUITE_P(Shapes, RowOpsTest,
                         ::testing::Combine(::testing::Values(96, 2048, 8192),
                                            ::testing::Values(1, 3, 16, 64)));

}  // namespace
}  // namespace tpserve::cuda_test
