#include "bench/tp_decode/skip_all_reduce.h"

namespace tpserve::bench {
namespace {

class SkipAllReduceCommunicator final : public parallel::Communicator {
 public:
  explicit SkipAllReduceCommunicator(parallel::Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void all_reduce_sum(void*, size_t, DType) override {}
  // Declines the fused sum, so the model runs its add + RMSNorm on the partials, then (here) no sum.
  bool all_reduce_add_rmsnorm(void*, void*, const void*, void*, int, int, float) override { return false; }
  void all_gather(const void* send, void* recv, size_t count, DType dtype) override {
    inner_.all_gather(send, recv, count, dtype);
  }
  void reduce_scatter_sum(const void* send, void* recv, size_t count, DType dtype) override {
    inner_.reduce_scatter_sum(send, recv, count, dtype);
  }
  void all_to_all(const void* send, void* recv, size_t count, DType dtype) override {
    inner_.all_to_all(send, recv, count, dtype);
  }
  void broadcast(void* data, size_t bytes, int root) override { inner_.broadcast(data, bytes, root); }
  void barrier() override { inner_.barrier(); }

 private:
  parallel::Communicator& inner_;
};

}  // namespace

std::unique_ptr<parallel::Communicator> make_skip_all_reduce_communicator(parallel::Communicator& inner) {
  return std::make_unique<SkipAllReduceCommunicator>(inner);
}

}  // namespace tpserve::bench
