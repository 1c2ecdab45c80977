// Prefix caching on the GPU, through the engine: a prompt whose leading blocks another request computed
// draws its first token from logits within bf16 tolerance of a full prefill (with and without the MTP
// head), and decoding on shared blocks goes on in replayed CUDA graphs beside requests that share them.
#include <gtest/gtest.h>

#include "parallel/communicator.h"
#include "runtime/engine/engine.h"
#include "tests/cuda/op_test_util.h"
#include "tests/cuda/small_gpu_engine.h"
#include "tests/model/prefix_cache_probe.h"

namespace tpserve::cuda_test {
namespace {

std::vector<int32_t> tokens(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 613 + salt * 97 + 11) % 4096));
  return t;
}

TEST(CudaPrefixCache, ACachedPrefixGivesTheLogitsOfAFullPrefill) {
  TPS_REQUIRE_CUDA_DEVICE();
  auto comm = parallel::make_single_rank_communicator();
  const std::vector<int32_t> shared = tokens(70, 1);
  std::vector<int32_t> prompt(shared.begin(), shared.begin() + 64);  // four blocks of 16
  const std::vector<int32_t> tail = tokens(9, 2);
  prompt.insert(prompt.end(), tail.begin(), tail.end());
  for (const std::vector<std::string>& spec :
       {std::vector<std::string>{},
        std::vector<std::string>{"speculative.method=mtp", "speculative.num_speculative_tokens=2"}}) {
    SCOPED_TRACE(spec.empty() ? "no speculation" : "MTP, k = 2");
    auto on = spec, off = spec;
    on.push_back("runtime.enable_prefix_caching=true");
    off.push_back("runtime.enable_prefix_caching=false");
    testing_util::FirstTokenLogits want, got;
    {
      auto full = small_gpu_engine(*comm, off, true);
      want = testing_util::first_token_logits(*full, {shared}, prompt);
    }
    auto cached = small_gpu_engine(*comm, on, true);
    got = testing_util::first_token_logits(*cached, {shared}, prompt);
    EXPECT_EQ(want.cached_tokens, 0);
    // MTP: the fourth block went on with shared[64], not with the tail.
    EXPECT_EQ(got.cached_tokens, spec.empty() ? 64 : 48);
    ASSERT_EQ(got.logits.size(), 4096u);
    expect_close("first-token logits", want.logits, got.logits, {0.05f * rms(want.logits), 0.05f});

    // Three requests on the shared prefix decode together in the replayed graphs.
    const int64_t replays = cached->model().graph_replays();
    std::vector<Request> requests;
    for (int i = 0; i < 3; ++i) {
      std::vector<int32_t> p(shared.begin(), shared.begin() + 40 + 7 * i);
      requests.push_back(Request{.prompt = p, .max_tokens = 24, .ignore_eos = true});
    }
    const auto out = cached->generate_together(std::move(requests));
    for (const auto& t : out) EXPECT_EQ(t.size(), 24u);
    EXPECT_GT(cached->model().graph_replays(), replays);
    EXPECT_GE(cached->scheduler().prefix_cache_metrics().hit_tokens, 48 + 3 * 32);
  }
}

}  // namespace
}  // namespace tpserve::cuda_test
