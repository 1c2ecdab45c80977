// The top-k gating's own cost in SM clock cycles (kernels/topk_gating.cuh, the code the fused router's
// block 0 runs), apart from the router around it: one block on every SM gates one token's
// logits from shared memory `reps` times in a row with warp 0, thread 0 reading clock64 before and after each
// pass.
#pragma once

#include <cstdint>
#include <vector>

namespace tpserve::bench {

struct GatingCyclesCase {
  int experts = 128;  // E, 1..128 (the fused router's limit: 4 experts a lane)
  int k = 8;
  bool redux = true;
  bool by_logits = true;  // TopkGatingParams::by_logits; false: the probabilities' order
  int reps = 8;           // passes a launch
};

// cycles[launch][sm * reps + pass] for `launches` launches in a row on one stream (the first finds the code
// in no cache; later ones find it where the previous launch left it). Logits: a hash of (seed, expert) in
// [-4, 4). Checks the picks of every pass against the CPU reference (cpu::topk_gating; throws on a
// mismatch).
std::vector<std::vector<long long>> run_gating_cycles(const GatingCyclesCase& c, int launches, uint64_t seed);

}  // namespace tpserve::bench
