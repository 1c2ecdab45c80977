// The benchmark's skip-all-reduce communicator: sums do nothing (and the fused sum declines), every other
// collective reaches the real communicator.
#include "bench/tp_decode/skip_all_reduce.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tpserve::bench {
namespace {

class RecordingCommunicator final : public parallel::Communicator {
 public:
  int rank() const override { return 1; }
  int size() const override { return 2; }
  void all_reduce_sum(void*, size_t, DType) override { calls.push_back("all_reduce_sum"); }
  bool all_reduce_add_rmsnorm(void*, void*, const void*, void*, int, int, float) override {
    calls.push_back("all_reduce_add_rmsnorm");
    return true;
  }
  void all_gather(const void*, void*, size_t, DType) override { calls.push_back("all_gather"); }
  void reduce_scatter_sum(const void*, void*, size_t, DType) override {
    calls.push_back("reduce_scatter_sum");
  }
  void all_to_all(const void*, void*, size_t, DType) override { calls.push_back("all_to_all"); }
  void broadcast(void*, size_t, int) override { calls.push_back("broadcast"); }
  void barrier() override { calls.push_back("barrier"); }
  std::vector<std::string> calls;
};

TEST(SkipAllReduce, SumsDoNothingAndEverythingElseIsForwarded) {
  RecordingCommunicator inner;
  auto comm = make_skip_all_reduce_communicator(inner);
  EXPECT_EQ(comm->rank(), 1);
  EXPECT_EQ(comm->size(), 2);
  float x[4] = {1, 2, 3, 4};
  comm->all_reduce_sum(x, 4, DType::kF32);
  EXPECT_EQ(x[3], 4.0f);
  EXPECT_FALSE(comm->all_reduce_add_rmsnorm(x, x, x, x, 1, 4, 1e-6f));
  comm->all_gather(x, x, 1, DType::kF32);
  comm->reduce_scatter_sum(x, x, 1, DType::kF32);
  comm->all_to_all(x, x, 1, DType::kF32);
  comm->broadcast(x, 4, 0);
  comm->barrier();
  EXPECT_EQ(inner.calls, (std::vector<std::string>{"all_gather", "reduce_scatter_sum", "all_to_all",
                                                   "broadcast", "barrier"}));
}

}  // namespace
}  // namespace tpserve::bench
