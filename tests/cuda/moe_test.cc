// CUDA MoE ops against the CPU reference: top-k gating (ties included), fused experts (local slices of the
// experts too), and the expert-parallel pack / expert rows / combine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>
#include <utility>

#include "tests/cuda/op_test_util.h"

namespace tpserve::cuda_test {
namespace {

struct GatingCase {
  int tokens, experts, k;
  bool renormalize;
};
void PrintTo(const GatingCase& c, std::ostream* os) {
  *os << "T " << c.tokens << " E " << c.experts << " k " << c.k << (c.renormalize ? " renormalised" : "");
}

class TopkGatingTest : public ::testing::TestWithParam<GatingCase> {};

TEST_P(TopkGatingTest, MatchesCpu) {
  TPS_REQUIRE_CUDA_DEVICE();
  const GatingCase c = GetParam();
  std::mt19937 rng(c.tokens * 7 + c.experts * 131 + c.k * 1009 + c.renormalize);
  Backends b;
  auto logits = uniform(rng, size_t(c.tokens) * c.experts, -4.0f, 4.0f);
  // Exact ties: in every other token, copy a few logits onto others (ties go to the smaller index).
  std::uniform_int_distribution<int> pick(0, c.experts - 1);
  for (int t = 0; t < c.tokens; t += 2)
    for (int i = 0; i < 4; ++i)
      logits[size_t(t) * c.experts + pick(rng)] = logits[size_t(t) * c.experts + pick(rng)];
  // Ties among the picks in every fourth token: 6 levels, so that experts of several lanes and of one lane
  // share the largest logits (the rounds' rerun, kernels/topk_gating.cuh logit_rounds_exact).
  std::uniform_int_distribution<int> level(0, 5);
  for (int t = 3; t < c.tokens; t += 4)
    for (int e = 0; e < c.experts; ++e) logits[size_t(t) * c.experts + e] = 0.5f * static_cast<float>(level(rng));
  Pair l = b.f32({c.tokens, c.experts}, logits);
  Pair w = b.output(DType::kF32, {c.tokens, c.k}), ids = b.output(DType::kI32, {c.tokens, c.k});
  b.cpu().topk_gating(l.cpu, c.k, c.renormalize, w.cpu, ids.cpu);
  b.gpu().topk_gating(l.gpu, c.k, c.renormalize, w.gpu, ids.gpu);
  expect_equal("gating ids", cpu_ints(ids.cpu), b.ints(ids.gpu));
  expect_close("gating weights", cpu_floats(w.cpu), b.floats(w.gpu), {1e-6f, 1e-4f});
}

INSTANTIATE_TEST_SUITE_P(Shapes, TopkGatingTest,
                         ::testing::Values(GatingCase{1, 8, 2, true}, GatingCase{3, 8, 2, false},
                                           GatingCase{16, 128, 8, true}, GatingCase{64, 128, 8, false},
                                           GatingCase{16, 512, 10, true}, GatingCase{3, 512, 16, false},
                                           GatingCase{5, 40, 16, true}, GatingCase{7, 200, 8, true},
                                           GatingCase{2, 256, 16, false}, GatingCase{4, 129, 8, true}));

// Logits of c.tokens rows (at least 6) seeded by c: random with exact ties in row 0, all equal in row 1, a
// NaN in row 2, probabilities exactly 0 but for expert 0 in row 3 (ties at 0), -0 and +0 as the largest in
// row 4, random in row 5 on.
std::vector<float> gating_edge_rows(const GatingCase& c) {
  std::mt19937 rng(c.experts * 17 + c.k);
  auto logits = uniform(rng, size_t(c.tokens) * c.experts, -4.0f, 4.0f);
  std::uniform_int_distribution<int> pick(0, c.experts - 1);
  for (int i = 0; i < 8; ++i) logits[pick(rng)] = logits[pick(rng)];
  for (int e = 0; e < c.experts; ++e) logits[size_t(1) * c.experts + e] = 0.5f;
  logits[size_t(2) * c.experts + pick(rng)] = std::nanf("");
  for (int e = 1; e < c.experts; ++e) logits[size_t(3) * c.experts + e] = -200.0f;
  for (int e = 0; e < c.experts; ++e)
    logits[size_t(4) * c.experts + e] = -std::abs(logits[size_t(4) * c.experts + e]);
  logits[size_t(4) * c.experts + pick(rng)] = -0.0f;
  logits[size_t(4) * c.experts + pick(rng)] = 0.0f;
  return logits;
}

// The gating's ids and weights on `logits` with runtime.topk_gating_redux and runtime.topk_gating_by_logits
// as given.
std::pair<std::vector<int32_t>, std::vector<float>> gpu_gating(const GatingCase& c,
                                                               const std::vector<float>& logits, bool redux,
                                                               bool by_logits) {
  CudaBackendOptions options = test_backend_options();
  options.kernels.topk_gating_redux = redux;
  options.kernels.topk_gating_by_logits = by_logits;
  Backends b(options);
  Pair l = b.f32({c.tokens, c.experts}, logits);
  Pair w = b.output(DType::kF32, {c.tokens, c.k}), id = b.output(DType::kI32, {c.tokens, c.k});
  b.gpu().topk_gating(l.gpu, c.k, c.renormalize, w.gpu, id.gpu);
  return {b.ints(id.gpu), b.floats(w.gpu)};
}

const GatingCase kEdgeCases[] = {GatingCase{6, 8, 2, true},    GatingCase{6, 128, 8, true},
                                 GatingCase{6, 129, 8, false}, GatingCase{6, 512, 16, true},
                                 GatingCase{6, 40, 16, false}, GatingCase{6, 128, 1, true}};

// The arg-max rounds through warp reductions (runtime.topk_gating_redux) or through shuffle steps, in either
// order (runtime.topk_gating_by_logits): the same ids and weights, bit for bit, on every edge row (in the
// order of the probabilities a NaN makes every probability NaN, so that no expert is picked; by the logits it
// counts as -inf), and ties at 0, the key the reductions must tell from "no candidate".
TEST(TopkGating, ReduxAndShufflesPickTheSame) {
  TPS_REQUIRE_CUDA_DEVICE();
  for (const GatingCase& c : kEdgeCases) {
    const std::vector<float> logits = gating_edge_rows(c);
    for (bool by_logits : {true, false}) {
      const auto redux = gpu_gating(c, logits, true, by_logits),
                 shuffles = gpu_gating(c, logits, false, by_logits);
      std::ostringstream what;
      PrintTo(c, &what);
      what << (by_logits ? ", by the logits" : ", by the probabilities");
      expect_equal(what.str() + ": ids, redux against shuffles", redux.first, shuffles.first);
      expect_close(what.str() + ": weights, redux against shuffles", redux.second, shuffles.second,
                   {0.0f, 0.0f});
    }
  }
}

// The rounds on the logits' order against the rounds on the probabilities: the same ids and weights, bit
// for bit, on every edge row but the NaN's (row 2), where the logits' order matches the CPU reference
// (a NaN as -inf) instead: ids equal, weights close, every id a distinct expert.
TEST(TopkGating, ByLogitsPicksAsByProbabilities) {
  TPS_REQUIRE_CUDA_DEVICE();
  for (const GatingCase& c : kEdgeCases) {
    const std::vector<float> logits = gating_edge_rows(c);
    const auto by_logits = gpu_gating(c, logits, true, true), by_probs = gpu_gating(c, logits, true, false);
    std::ostringstream what;
    PrintTo(c, &what);
    for (int t = 0; t < c.tokens; ++t) {
      if (t == 2) continue;
      const auto row = [&](const auto& v) {
        return std::vector(v.begin() + t * c.k, v.begin() + (t + 1) * c.k);
      };
      const std::string at = what.str() + " row " + std::to_string(t);
      expect_equal(at + ": ids", row(by_probs.first), row(by_logits.first));
      expect_close(at + ": weights", row(by_probs.second), row(by_logits.second), {0.0f, 0.0f});
    }
    Backends b;
    Pair l = b.f32({c.tokens, c.experts}, logits);
    Pair w = b.output(DType::kF32, {c.tokens, c.k}), id = b.output(DType::kI32, {c.tokens, c.k});
    b.cpu().topk_gating(l.cpu, c.k, c.renormalize, w.cpu, id.cpu);
    const std::vector<int32_t> cpu_ids = cpu_ints(id.cpu);
    const std::vector<float> cpu_weights = cpu_floats(w.cpu);
    const size_t nan_row = size_t(2) * c.k;
    expect_equal(what.str() + " NaN row: ids against the CPU",
                 std::vector(cpu_ids.begin() + nan_row, cpu_ids.begin() + nan_row + c.k),
                 std::vector(by_logits.first.begin() + nan_row, by_logits.first.begin() + nan_row + c.k));
    expect_close(what.str() + " NaN row: weights against the CPU",
                 std::vector(cpu_weights.begin() + nan_row, cpu_weights.begin() + nan_row + c.k),
                 std::vector(by_logits.second.begin() + nan_row, by_logits.second.begin() + nan_row + c.k),
                 {1e-6f, 1e-4f});
    std::vector<int32_t> nan_ids(by_logits.first.begin() + nan_row, by_logits.first.begin() + nan_row + c.k);
    std::sort(nan_ids.begin(), nan_ids.end());
    EXPECT_TRUE(std::adjacent_find(nan_ids.begin(), nan_ids.end()) == nan_ids.end() && nan_ids.front() >= 0 &&
                nan_ids.back() < c.experts)
        << what.str() << ": the NaN row's ids are not distinct experts";
  }
}

struct MoeCase {
  int tokens, hidden, inter, experts_total, k;
  int expert_begin, local_experts;  // this rank's slice of the experts
};

std::string describe(const MoeCase& c) {
  return "T " + std::to_string(c.tokens) + " H " + std::to_string(c.hidden) + " I " +
         std::to_string(c.inter) + " E " + std::to_string(c.experts_total) + " k " + std::to_string(c.k) +
         " local [" + std::to_string(c.expert_begin) + ", +" + std::to_string(c.local_experts) + ")";
}
void PrintTo(const MoeCase& c, std::ostream* os) {
  *os << describe(c);
}

// Routing like the model's: distinct experts per token from random logits, renormalised weights.
void route(std::mt19937& rng, int tokens, int experts, int k, std::vector<int32_t>& ids,
           std::vector<float>& weights) {
  ids.assign(size_t(tokens) * k, 0);
  weights.assign(size_t(tokens) * k, 0.0f);
  std::vector<int> order(experts);
  std::uniform_real_distribution<float> w(0.05f, 1.0f);
  for (int t = 0; t < tokens; ++t) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int j = 0; j < k; ++j) ids[size_t(t) * k + j] = order[j], weights[size_t(t) * k + j] = w(rng);
  }
}

// A case's inputs on both backends: x, the local experts' weights (scaled like a trained layer's), routing.
struct MoeInputs {
  Pair x, gate_up, down, ids, weights;
};
MoeInputs make_moe_inputs(Backends& b, std::mt19937& rng, const MoeCase& c) {
  auto xv = uniform(rng, size_t(c.tokens) * c.hidden);
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(c.hidden));
  auto guv = uniform(rng, size_t(c.local_experts) * 2 * c.inter * c.hidden, -2 * w_scale, 2 * w_scale);
  auto dv = uniform(rng, size_t(c.local_experts) * c.hidden * c.inter, -w_scale, w_scale);
  std::vector<int32_t> ids;
  std::vector<float> weights;
  route(rng, c.tokens, c.experts_total, c.k, ids, weights);
  return {b.bf16({c.tokens, c.hidden}, xv), b.bf16({c.local_experts, 2 * c.inter, c.hidden}, guv),
          b.bf16({c.local_experts, c.hidden, c.inter}, dv), b.i32({c.tokens, c.k}, ids),
          b.f32({c.tokens, c.k}, weights)};
}

// moe_experts on both backends: the CPU's output into ref, the GPU's returned.
std::vector<float> run_moe_experts(Backends& b, const MoeInputs& in, const MoeCase& c,
                                   std::vector<float>& ref) {
  Pair out = b.output(DType::kBF16, {c.tokens, c.hidden});
  b.cpu().moe_experts(in.x.cpu, in.gate_up.cpu, in.down.cpu, in.ids.cpu, in.weights.cpu, c.expert_begin,
                      out.cpu);
  b.gpu().moe_experts(in.x.gpu, in.gate_up.gpu, in.down.gpu, in.ids.gpu, in.weights.gpu, c.expert_begin,
                      out.gpu);
  ref = cpu_floats(out.cpu);
  return b.floats(out.gpu);
}

// Each case with the default kernel options (the down kernel's weights staged in shared memory where I
// allows; one token without moe_align; gate_up by bulk copies from 2 tokens where H allows) and with the
// plain paths (registers; always through moe_align).
class MoeExpertsTest : public ::testing::TestWithParam<std::tuple<MoeCase, bool>> {};

TEST_P(MoeExpertsTest, MatchesCpu) {
  TPS_REQUIRE_CUDA_DEVICE();
  const auto [c, defaults] = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>()(describe(c))) + (defaults ? 1 : 0));
  CudaBackendOptions options = test_backend_options();
  options.kernels.moe_down_staged = defaults;
  options.kernels.moe_one_token_direct = defaults;
  if (!defaults) options.kernels.moe_gate_up_bulk_min_tokens = 0;
  Backends b(options);
  const MoeInputs in = make_moe_inputs(b, rng, c);
  const Pair &x = in.x, &gate_up = in.gate_up, &down = in.down, &ids_t = in.ids, &w_t = in.weights;
  Pair out = b.output(DType::kBF16, {c.tokens, c.hidden});
  b.cpu().moe_experts(x.cpu, gate_up.cpu, down.cpu, ids_t.cpu, w_t.cpu, c.expert_begin, out.cpu);
  b.gpu().moe_experts(x.gpu, gate_up.gpu, down.gpu, ids_t.gpu, w_t.gpu, c.expert_begin, out.gpu);
  const auto ref = cpu_floats(out.cpu);
  // The intermediate is bf16 on the GPU (f32 on the CPU): about 2^-9 relative per element, averaged.
  expect_close("moe_experts " + describe(c) + (defaults ? " (defaults)" : " (plain)"), ref, b.floats(out.gpu),
               {2e-2f * rms(ref) + 1e-4f, 2e-2f});
}

// I not a multiple of 32 (40, 72) takes the register path even where staging is asked for.
INSTANTIATE_TEST_SUITE_P(
    Shapes, MoeExpertsTest,
    ::testing::Combine(::testing::Values(MoeCase{1, 96, 64, 8, 2, 0, 8}, MoeCase{3, 96, 40, 8, 2, 0, 8},
                                         MoeCase{16, 256, 96, 128, 8, 0, 128},
                                         MoeCase{64, 96, 64, 128, 8, 0, 128},
                                         MoeCase{16, 96, 32, 512, 10, 0, 512},
                                         MoeCase{1, 2048, 768, 16, 8, 0, 16},
                                         MoeCase{1, 96, 64, 16, 4, 8, 8},  // one token, EP slice
                                         MoeCase{1, 96, 64, 8, 2, 8, 8},   // one token, no expert here
                                         MoeCase{16, 2048, 768, 8, 8, 0, 8},
                                         MoeCase{64, 96, 64, 8, 2, 0, 8},      // > 16 a expert
                                         MoeCase{16, 96, 64, 128, 8, 32, 32},  // EP slice
                                         MoeCase{3, 264, 72, 16, 4, 8, 8}),
                       ::testing::Bool()));

// gate_up through bulk copies into shared memory (runtime.moe_gate_up_bulk_min_tokens = 1, every launch)
// against the CPU: one token without moe_align, several tokens through it (one and two n-tiles a work
// item), an EP slice, and an H that is not a multiple of 256 (the register kernel then); 2 to 6 stages in
// flight (runtime.moe_gate_up_bulk_stages), fewer and more than H has; stages of 256 and of 512 columns
// (runtime.moe_gate_up_bulk_cols(_one_token); 512 falls back to 256 where H is not a multiple of 512:
// H = 768), each block starting at piece 0 or at its own (runtime.moe_gate_up_bulk_rotate_max_tokens).
TEST(MoeGateUpBulk, MatchesCpu) {
  TPS_REQUIRE_CUDA_DEVICE();
  const MoeCase cases[] = {MoeCase{1, 2048, 768, 16, 8, 0, 16},  MoeCase{16, 2048, 768, 8, 8, 0, 8},
                           MoeCase{16, 256, 96, 128, 8, 0, 128}, MoeCase{64, 512, 64, 8, 2, 0, 8},
                           MoeCase{16, 768, 64, 128, 8, 32, 32}, MoeCase{3, 264, 72, 16, 4, 8, 8},
                           MoeCase{1, 1536, 96, 16, 8, 0, 16}};
  for (size_t i = 0; i < std::size(cases); ++i) {
    const MoeCase& c = cases[i];
    const int stages = 2 + static_cast<int>(i % 5), cols = i == 1 ? 256 : 512;
    SCOPED_TRACE(std::to_string(stages) + " stages of " + std::to_string(cols) + " columns");
    std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>()(describe(c))) + 17);
    CudaBackendOptions options = test_backend_options();
    options.kernels.moe_gate_up_bulk_min_tokens = 1;
    options.kernels.moe_gate_up_bulk_stages = stages;
    options.kernels.moe_gate_up_bulk_stages_one_token = stages;
    options.kernels.moe_gate_up_bulk_cols = cols;
    options.kernels.moe_gate_up_bulk_cols_one_token = cols;
    options.kernels.moe_gate_up_bulk_rotate_max_tokens = i % 4 < 2 ? 1 << 20 : 0;
    options.kernels.weights_l2_evict_first = i % 2 == 0;  // bulk copies with and without the L2 hint
    Backends b(options);
    std::vector<float> ref;
    const std::vector<float> got = run_moe_experts(b, make_moe_inputs(b, rng, c), c, ref);
    expect_close("moe_experts, bulk gate_up, " + describe(c), ref, got, {2e-2f * rms(ref) + 1e-4f, 2e-2f});
  }
}

// runtime.moe_down_act_before_weights: the staged down kernel loads its activations before waiting for its
// weight copies, in tiles of one token column whose warps have at most 8 k blocks (I <= 1024), the other
// tiles as before. Against the CPU, and the same bits as with the switch off: I = 768 (6 k blocks a warp),
// 1024 (8), 1280 (10: the usual path), 64 (fewer k blocks than warps), and 16 tokens on 8 experts (tiles of
// more than 8 assignments: two token columns).
TEST(MoeDownActBeforeWeights, SameBitsAndMatchesCpu) {
  TPS_REQUIRE_CUDA_DEVICE();
  const MoeCase cases[] = {MoeCase{1, 2048, 768, 16, 8, 0, 16}, MoeCase{3, 512, 1024, 16, 4, 0, 16},
                           MoeCase{2, 256, 1280, 8, 2, 0, 8}, MoeCase{16, 256, 64, 128, 8, 0, 128},
                           MoeCase{16, 2048, 768, 8, 8, 0, 8}};
  for (const MoeCase& c : cases) {
    std::vector<float> got[2];
    std::vector<float> ref;
    for (int early : {0, 1}) {
      std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>()(describe(c))) + 29);  // same inputs
      CudaBackendOptions options = test_backend_options();
      options.kernels.moe_down_act_before_weights = early == 1;
      Backends b(options);
      got[early] = run_moe_experts(b, make_moe_inputs(b, rng, c), c, ref);
      expect_close("moe_experts, down activations " + std::string(early ? "before" : "after") +
                       " the weights, " + describe(c),
                   ref, got[early], {2e-2f * rms(ref) + 1e-4f, 2e-2f});
    }
    expect_close(describe(c) + ": activations before the weights against after, the same bits", got[0],
                 got[1], {0.0f, 0.0f});
  }
}

// The model's order for one token: top-k gating on the GPU, then the experts without moe_align, whose down
// kernel reads the top-k ids before its PDL wait (two launches after the gating). Against the CPU's same ops.
TEST(MoeOneToken, GatingThenExpertsMatchCpu) {
  TPS_REQUIRE_CUDA_DEVICE();
  for (const MoeCase& c : {MoeCase{1, 2048, 768, 16, 8, 0, 16}, MoeCase{1, 96, 64, 16, 4, 8, 8}}) {
    std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>()(describe(c))) + 11);
    Backends b;
    const MoeInputs in = make_moe_inputs(b, rng, c);
    auto lv = uniform(rng, size_t(c.experts_total), -4.0f, 4.0f);
    Pair logits = b.f32({1, c.experts_total}, lv);
    Pair w = b.output(DType::kF32, {1, c.k}), ids = b.output(DType::kI32, {1, c.k});
    Pair out = b.output(DType::kBF16, {1, c.hidden});
    for (int side = 0; side < 2; ++side) {
      Backend& be = side == 0 ? b.cpu() : static_cast<Backend&>(b.gpu());
      auto pick = [&](const Pair& p) { return side == 0 ? p.cpu : p.gpu; };
      be.topk_gating(pick(logits), c.k, true, pick(w), pick(ids));
      be.moe_experts(pick(in.x), pick(in.gate_up), pick(in.down), pick(ids), pick(w), c.expert_begin,
                     pick(out));
    }
    const auto ref = cpu_floats(out.cpu);
    expect_close("gating then experts " + describe(c), ref, b.floats(out.gpu),
                 {2e-2f * rms(ref) + 1e-4f, 2e-2f});
  }
}

// moe_experts_add_rmsnorm: the combine inside the residual add + RMSNorm (runtime.moe_fused_norm) and the
// separate ops, against the CPU's moe_experts then add_rmsnorm: the updated residual and the normed rows.
class MoeFusedNormTest : public ::testing::TestWithParam<std::tuple<MoeCase, bool>> {};

TEST_P(MoeFusedNormTest, MatchesCpu) {
  TPS_REQUIRE_CUDA_DEVICE();
  const auto [c, fused] = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>()(describe(c))) + (fused ? 3 : 5));
  CudaBackendOptions options = test_backend_options();
  options.kernels.moe_fused_norm = fused;
  options.kernels.norm_loads_before_wait = c.tokens % 2 == 0;  // both orders of the norm's weight loads
  options.kernels.moe_combine_early_routing = c.tokens != 3;   // and of the fused combine's routing loads
  options.kernels.moe_gate_up_bulk_min_tokens = c.tokens % 2;  // gate_up by bulk copies or by registers
  options.kernels.weights_l2_evict_first = c.tokens % 4 < 2;   // weight copies with and without the L2 hint
  Backends b(options);
  const MoeInputs in = make_moe_inputs(b, rng, c);
  const Pair &x = in.x, &gate_up = in.gate_up, &down = in.down, &ids_t = in.ids, &w_t = in.weights;
  auto rv = uniform(rng, size_t(c.tokens) * c.hidden), nv = uniform(rng, size_t(c.hidden), 0.5f, 1.5f);
  Pair residual = b.bf16({c.tokens, c.hidden}, rv), norm_w = b.bf16({c.hidden}, nv);
  // The normed rows overwrite x, as in the model (the MoE's input is the previous norm's output).
  Pair out = b.output(DType::kBF16, {c.tokens, c.hidden});
  const Pair& normed = x;
  b.cpu().moe_experts_add_rmsnorm(x.cpu, gate_up.cpu, down.cpu, ids_t.cpu, w_t.cpu, c.expert_begin, out.cpu,
                                  residual.cpu, norm_w.cpu, 1e-6f, normed.cpu);
  b.gpu().moe_experts_add_rmsnorm(x.gpu, gate_up.gpu, down.gpu, ids_t.gpu, w_t.gpu, c.expert_begin, out.gpu,
                                  residual.gpu, norm_w.gpu, 1e-6f, normed.gpu);
  const std::string what = describe(c) + (fused ? " (fused)" : " (separate)");
  const auto ref_residual = cpu_floats(residual.cpu), ref_normed = cpu_floats(normed.cpu);
  expect_close("residual " + what, ref_residual, b.floats(residual.gpu),
               {2e-2f * rms(ref_residual) + 1e-4f, 2e-2f});
  expect_close("normed " + what, ref_normed, b.floats(normed.gpu), {2e-2f * rms(ref_normed) + 1e-4f, 2e-2f});
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeFusedNormTest,
                         ::testing::Combine(::testing::Values(MoeCase{1, 2048, 768, 16, 8, 0, 16},
                                                              MoeCase{16, 96, 64, 128, 8, 0, 128},
                                                              MoeCase{3, 264, 72, 16, 4, 8, 8},  // EP slice
                                                              MoeCase{3, 96, 64, 8, 2, 8, 8},    // none here
                                                              // the fused kernel's longest row (256 threads x
                                                              // 4 pieces), and one past it (the two ops)
                                                              MoeCase{2, 8192, 64, 8, 8, 0, 8},
                                                              MoeCase{2, 8200, 64, 8, 2, 0, 8}),
                                            ::testing::Bool()));

TEST(MoeExpertParallel, PackExpertRowsCombineMatchCpu) {
  TPS_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(4242);
  Backends b;
  const int tokens = 13, hidden = 96, inter = 64, experts = 16, k = 4, peers = 4, per_rank = experts / peers;
  const int cap = tokens * k;
  auto xv = uniform(rng, size_t(tokens) * hidden);
  Pair x = b.bf16({tokens, hidden}, xv);
  std::vector<int32_t> ids;
  std::vector<float> weights;
  route(rng, tokens, experts, k, ids, weights);
  Pair ids_t = b.i32({tokens, k}, ids), w_t = b.f32({tokens, k}, weights);

  Pair send_x = b.output(DType::kBF16, {peers, cap, hidden}), send_e = b.output(DType::kI32, {peers, cap});
  Pair origin = b.output(DType::kI32, {tokens, k});
  b.gpu().zero(send_x.gpu);  // rows past each rank's fill are not written by either backend
  b.cpu().moe_pack(x.cpu, ids_t.cpu, per_rank, send_x.cpu, send_e.cpu, origin.cpu);
  b.gpu().moe_pack(x.gpu, ids_t.gpu, per_rank, send_x.gpu, send_e.gpu, origin.gpu);
  expect_equal("pack origin", cpu_ints(origin.cpu), b.ints(origin.gpu));
  expect_equal("pack send_expert", cpu_ints(send_e.cpu), b.ints(send_e.gpu));
  expect_close("pack send_x", cpu_floats(send_x.cpu), b.floats(send_x.gpu), {0.0f, 0.0f});

  // Expert rows on "rank 0" of the packed buffer as if it had received it (local ids, -1 rows skipped).
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(hidden));
  auto guv = uniform(rng, size_t(per_rank) * 2 * inter * hidden, -2 * w_scale, 2 * w_scale);
  auto dv = uniform(rng, size_t(per_rank) * hidden * inter, -w_scale, w_scale);
  Pair gate_up = b.bf16({per_rank, 2 * inter, hidden}, guv), down = b.bf16({per_rank, hidden, inter}, dv);
  const Tensor rows_cpu = send_x.cpu.view({peers * cap, hidden}),
               rows_gpu = send_x.gpu.view({peers * cap, hidden});
  const Tensor e_cpu = send_e.cpu.view({peers * cap}), e_gpu = send_e.gpu.view({peers * cap});
  Pair results = b.output(DType::kBF16, {peers * cap, hidden});
  b.gpu().zero(results.gpu);  // rows without an expert stay untouched: zeros on both
  b.cpu().moe_experts_rows(rows_cpu, e_cpu, gate_up.cpu, down.cpu, results.cpu);
  b.gpu().moe_experts_rows(rows_gpu, e_gpu, gate_up.gpu, down.gpu, results.gpu);
  const auto ref_rows = cpu_floats(results.cpu);
  expect_close("expert rows", ref_rows, b.floats(results.gpu), {2e-2f * rms(ref_rows) + 1e-4f, 2e-2f});

  // Combine from the GPU's results on both sides, so that only the combine is compared.
  std::vector<float> gpu_rows = b.floats(results.gpu);
  Pair same_results = b.bf16({peers * cap, hidden}, gpu_rows);
  Pair out = b.output(DType::kBF16, {tokens, hidden});
  b.cpu().moe_combine(same_results.cpu, origin.cpu, w_t.cpu, out.cpu);
  b.gpu().moe_combine(same_results.gpu, origin.gpu, w_t.gpu, out.gpu);
  expect_close("combine", cpu_floats(out.cpu), b.floats(out.gpu), {1e-3f, 1e-2f});
}

}  // namespace
}  // namespace tpserve::cuda_test
