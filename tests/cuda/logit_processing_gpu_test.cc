// Logit bias, penalties and min_tokens on the GPU: each emitted token's step logits against a plain GPU
// engine's logits of the same prefix processed on the host (bf16 prefill vs decode: loose tolerance; -inf
// exactly), greedy and under MTP; and a processed request beside a plain one in a graph-captured engine
// (its steps run eagerly) leaves the plain one's tokens as they are alone. Token masks (structured output)
// likewise: the masked step logits are the raw ones with the refused tokens at -inf, without and with MTP
// (not speculated), and the rule ends the request.
#include <gtest/gtest.h>

#include "parallel/communicator.h"
#include "runtime/engine/engine.h"
#include "tests/cuda/op_test_util.h"
#include "tests/cuda/small_gpu_engine.h"
#include "tests/model/logit_processing_check.h"
#include "tests/unit/modulo_constraint.h"

namespace tpserve::cuda_test {
namespace {

Request processed_request(const std::vector<int32_t>& plain_tokens) {
  Request r{.id = 1, .prompt = {21, 22, 23, 21, 24}, .max_tokens = 12, .ignore_eos = true};
  r.stop_token_ids = {plain_tokens[2]};
  r.processing = {.logit_bias = {{plain_tokens[0], -100.0f}, {77, 2.5f}},
                  .repetition_penalty = 0.25f,
                  .frequency_penalty = 0.4f,
                  .presence_penalty = 0.6f,
                  .min_tokens = 6};
  return r;
}

TEST(CudaLogitProcessing, StepLogitsAreTheProcessedRawLogits) {
  TPS_REQUIRE_CUDA_DEVICE();
  auto comm = parallel::make_single_rank_communicator();
  auto plain = small_gpu_engine(*comm, {"cuda_graph.enabled=false"}, true);
  const Request r = processed_request(plain->generate({21, 22, 23, 21, 24}, SamplingParams{}, 4, true));
  for (const std::vector<std::string>& overrides :
       {std::vector<std::string>{}, {"speculative.method=mtp", "speculative.num_speculative_tokens=2"}}) {
    auto run = small_gpu_engine(*comm, overrides, true);
    const auto got = testing_util::check_processed_run(*run, *plain, r, 0.1, 0.05);
    EXPECT_EQ(got.tokens.size(), 12u);
    EXPECT_EQ(got.drafts, 0);  // penalised: not speculated
  }
}

TEST(CudaLogitProcessing, EagerProcessedStepsLeaveGraphReplaysAlone) {
  TPS_REQUIRE_CUDA_DEVICE();
  auto comm = parallel::make_single_rank_communicator();
  auto engine = small_gpu_engine(*comm, {}, false);
  ASSERT_FALSE(engine->model().graph_reports().empty());
  const std::vector<int32_t> prompt = {31, 32, 33};
  const auto alone = engine->generate(prompt, SamplingParams{}, 16, true);
  const int64_t replays = engine->model().graph_replays();
  Request plain{.id = 0, .prompt = prompt, .max_tokens = 16, .ignore_eos = true};
  Request biased{.id = 0, .prompt = prompt, .max_tokens = 24, .ignore_eos = true};
  biased.processing.logit_bias = {{77, 100.0f}};
  const auto together = engine->generate_together({plain, biased});
  EXPECT_EQ(together[0], alone);
  EXPECT_EQ(together[1], std::vector<int32_t>(24, 77));
  // The biased request outlives the plain one by 8 steps; the steps they shared ran eagerly; none replayed.
  EXPECT_EQ(engine->model().graph_replays(), replays);
  EXPECT_EQ(engine->generate(prompt, SamplingParams{}, 16, true), alone);
  EXPECT_GT(engine->model().graph_replays(), replays);
}

TEST(CudaLogitProcessing, MaskedStepLogitsAreTheRawLogitsWithRefusedTokensOut) {
  TPS_REQUIRE_CUDA_DEVICE();
  auto comm = parallel::make_single_rank_communicator();
  auto plain = small_gpu_engine(*comm, {"cuda_graph.enabled=false"}, true);
  for (const std::vector<std::string>& overrides :
       {std::vector<std::string>{}, {"speculative.method=mtp", "speculative.num_speculative_tokens=2"}}) {
    auto run = small_gpu_engine(*comm, overrides, true);
    Request r{.id = 1, .prompt = {41, 42, 43}, .max_tokens = 16, .ignore_eos = true};
    r.constraint = std::make_shared<testing_util::ModuloConstraint>(7, 8);
    testing_util::ModuloConstraint mirror(7, 8);
    const auto got = testing_util::check_processed_run(*run, *plain, r, 0.1, 0.05, &mirror);
    ASSERT_EQ(got.tokens.size(), 8u);  // the rule finished after 8 tokens
    for (int n = 0; n < 8; ++n) EXPECT_EQ((got.tokens[n] + n) % 7, 0) << n;
    EXPECT_EQ(got.drafts, 0);  // constrained: not speculated
  }
}

}  // namespace
}  // namespace tpserve::cuda_test
