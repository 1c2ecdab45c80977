// tp_decode's --shared-prefix: every prompt of every round starts with the same ids, the rest stays per
// request; on an engine with prefix caching, a round after the first starts each request on the cached
// prefix (the requests of one round start together and compute it each).
#include <gtest/gtest.h>

#include "bench/tp_decode/decode_round.h"
#include "bench/tp_decode/device_probe.h"
#include "common/error.h"
#include "parallel/communicator.h"
#include "runtime/config/config_parser.h"
#include "runtime/engine/engine.h"

namespace tpserve::bench {
namespace {

TEST(SharedPrefix, PromptsShareTheirFirstIdsAcrossRequestsAndRounds) {
  const auto a = make_prompts(3, 4, 0, 12, 1000, 5), b = make_prompts(3, 4, 1, 12, 1000, 5);
  for (const auto& p : {a[1], a[2], a[3], b[0], b[3]}) {
    ASSERT_EQ(p.size(), 12u);
    EXPECT_TRUE(std::equal(p.begin(), p.begin() + 5, a[0].begin()));
  }
  EXPECT_NE(std::vector<int32_t>(a[0].begin() + 5, a[0].end()),
            std::vector<int32_t>(a[1].begin() + 5, a[1].end()));
  EXPECT_NE(std::vector<int32_t>(a[0].begin() + 5, a[0].end()),
            std::vector<int32_t>(b[0].begin() + 5, b[0].end()));
  // Without one, no two prompts start alike; the whole prompt may be shared; more is refused.
  const auto c = make_prompts(3, 4, 0, 12, 1000);
  EXPECT_NE(c[0].front(), c[1].front());
  const auto d = make_prompts(3, 2, 0, 12, 1000, 12);
  EXPECT_EQ(d[0], d[1]);
  EXPECT_THROW(make_prompts(3, 2, 0, 12, 1000, 13), Error);
}

TEST(SharedPrefix, LaterRoundsStartOnTheCachedPrefix) {
  auto comm = parallel::make_single_rank_communicator();
  Engine engine(load_config_file(std::string(TPSERVE_SOURCE_DIR) + "/configs/tiny.yaml",
                                 {"runtime.backend=cpu", "runtime.max_batch=4", "runtime.max_seq_len=64",
                                  "runtime.kv_block_size=16"}),
                *comm, make_cpu_backend());
  auto probe = make_device_probe(engine.backend());
  const PrefixCacheMetrics& m = engine.scheduler().prefix_cache_metrics();
  RoundSpec spec{.concurrency = 2, .input_len = 40, .shared_prefix_len = 32, .output_len = 3, .seed = 1};
  run_decode_round(engine, spec, nullptr, *probe);
  EXPECT_EQ(m.hit_tokens, 32);  // the second request waits a step for the first's prefix blocks
  spec.round = 1;
  run_decode_round(engine, spec, nullptr, *probe);
  EXPECT_EQ(m.hit_tokens, 32 + 2 * 32);
  EXPECT_EQ(m.queried_tokens, 4 * 40);
}

}  // namespace
}  // namespace tpserve::bench
