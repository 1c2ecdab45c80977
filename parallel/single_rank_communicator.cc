// The communicator of a one-rank group: collectives degenerate to copies.
#include <cstring>

#include "parallel/communicator.h"

namespace tpserve::parallel {
namespace {

class SingleRankCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(void*, size_t, DType) override {}
  void all_gather(const void* send, void* recv, size_t count, DType dtype) override {
    copy(send, recv, count, dtype);
  }
  void reduce_scatter_sum(const void* send, void* recv, size_t count, DType dtype) override {
    copy(send, recv, count, dtype);
  }
  void all_to_all(const void* send, void* recv, size_t count, DType dtype) override {
    copy(send, recv, count, dtype);
  }
  void broadcast(void*, size_t, int) override {}
  void barrier() override {}

 private:
  static void copy(const void* send, void* recv, size_t count, DType dtype) {
    if (send != recv) std::memmove(recv, send, count * dtype_size(dtype));
  }
};

}  // namespace

std::unique_ptr<Communicator> make_single_rank_communicator() {
  return std::make_unique<SingleRankCommunicator>();
}

}  // namespace tpserve::parallel
