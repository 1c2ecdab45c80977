// handoff's host side: for one hidden size, the chain's buffers (random weights and input), one CUDA graph
// per arm (bench/handoff/handoff_kernels.h), and rounds that replay the arms' graphs in A/B/B/A order
// (bench/common/arm_schedule.h), each timed over a number of back-to-back replays by CUDA events.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/handoff/handoff_kernels.h"

namespace tpserve::bench {

struct HandoffOptions {
  std::vector<int> hiddens = {1024, 2048};
  int stages = 48;
  int rounds = 6;
  int replays = 20;  // back-to-back graph replays timed per arm and round
  int device = 0;
  uint64_t seed = 1;
  std::string json_path;
  bool skew = false;        // GPU tests: HandoffChain::skew
  bool skip_waits = false;  // GPU tests: HandoffChain::skip_waits (a broken handoff)
};

struct HandoffCase {
  int hidden = 0;
  int stages = 0;
  int rows_per_block = 0;
  int blocks = 0;
  double weight_bytes = 0;                              // read by one chain: stages x hidden^2 x 2
  std::array<std::vector<double>, kNumHandoffArms> us;  // per round: one chain, microseconds
  std::vector<std::vector<int>> order;                  // per round: arm indices in the order run
  // x_stages of each arm's checked run in round 0 (every stage's output poisoned with NaN first), bf16 bits.
  std::array<std::vector<uint16_t>, kNumHandoffArms> out;
  bool outputs_match = false;  // the checked runs of every arm and round gave the same bits
};

// Runs every arm of one hidden size on `stream` (device memory allocated and freed here). `sms`: the
// device's multiprocessors (the grid fills them once).
HandoffCase run_handoff_case(int hidden, const HandoffOptions& o, int sms, cudaStream_t stream);

// The chain's weights and input as run_handoff_case fills them (for a reference on the host): W_s, then
// x_0, bf16 bits.
std::vector<uint16_t> handoff_weights_host(int hidden, int stages, uint64_t seed);
std::vector<uint16_t> handoff_input_host(int hidden, uint64_t seed);

}  // namespace tpserve::bench
