// Log-probabilities on the GPU: every returned log-probability against a log-softmax (on the host, in double)
// of the logits the GPU step computed (steps that ask run eagerly), greedy, sampled and under MTP
// speculation.
#include <gtest/gtest.h>

#include "parallel/communicator.h"
#include "runtime/engine/engine.h"
#include "tests/cuda/op_test_util.h"
#include "tests/cuda/small_gpu_engine.h"
#include "tests/model/logprobs_check.h"

namespace tpserve::cuda_test {
namespace {

void check(const std::vector<std::string>& overrides, const SamplingParams& sampling) {
  auto comm = parallel::make_single_rank_communicator();
  auto engine = small_gpu_engine(*comm, overrides, true);
  // f32 logits; the device's sums of exp against the host's in double: 1e-3 in log space.
  EXPECT_EQ(testing_util::check_logprobs_against_logits(*engine, sampling, 1e-3), 12);
}

TEST(CudaLogprobs, AreALogSoftmaxOfTheStepsLogits) {
  TPS_REQUIRE_CUDA_DEVICE();
  check({}, SamplingParams{});
  check({}, SamplingParams{.temperature = 0.7f, .top_k = 40, .top_p = 0.9f, .seed = 5});
  check({"speculative.method=mtp", "speculative.num_speculative_tokens=2"}, SamplingParams{});
}

// Without keep_logits (production buffers): steps that ask must run eagerly though graphs are captured (a
// replay would leave the previous step's candidates), and be taken before the MTP draft steps reuse the
// logits buffer (with keep_logits the drafts get one of their own): the same tokens and log-probabilities.
TEST(CudaLogprobs, GraphsAndMtpDraftsLeaveThemAlone) {
  TPS_REQUIRE_CUDA_DEVICE();
  auto comm = parallel::make_single_rank_communicator();
  const auto eager =
      testing_util::greedy_with_logprobs(*small_gpu_engine(*comm, {"cuda_graph.enabled=false"}, false));
  std::vector<TokenEvent> graphs;
  {
    auto e = small_gpu_engine(*comm, {}, false);
    ASSERT_FALSE(e->model().graph_reports().empty());
    graphs = testing_util::greedy_with_logprobs(*e);
  }
  testing_util::expect_same_logprobs(graphs, eager, 1e-5);
  const std::vector<std::string> mtp = {"speculative.method=mtp", "speculative.num_speculative_tokens=2",
                                        "cuda_graph.enabled=false"};
  const auto kept = testing_util::greedy_with_logprobs(*small_gpu_engine(*comm, mtp, true));
  const auto shared = testing_util::greedy_with_logprobs(*small_gpu_engine(*comm, mtp, false));
  testing_util::expect_same_logprobs(shared, kept, 1e-5);
}

}  // namespace
}  // namespace tpserve::cuda_test
