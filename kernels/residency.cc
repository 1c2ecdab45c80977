#include "kernels/residency.h"

#include <algorithm>
#include <array>

namespace tpserve::kernels {
namespace {

constexpr int kSubPartitions = 4;        // an SM's register file is split among its 4 schedulers
constexpr int kRegAllocation = 256;      // registers are allocated to a warp in these units
constexpr size_t kSmemAllocation = 128;  // shared memory is allocated to a block in these units

int warps_of(const BlockFootprint& b) {
  return (std::max(b.threads, 1) + 31) / 32;
}

// Register units (of kRegAllocation) one warp of `b` takes.
int warp_units(const BlockFootprint& b) {
  return (std::max(b.regs_per_thread, 1) * 32 + kRegAllocation - 1) / kRegAllocation;
}

// Shared memory one block of `b` takes of the SM: its own and the per-block reserve, in allocation units.
size_t smem_of(const SmLimits& sm, const BlockFootprint& b) {
  return (b.smem + sm.reserved_smem_per_block + kSmemAllocation - 1) / kSmemAllocation * kSmemAllocation;
}

int units_per_sub_partition(const SmLimits& sm) {
  return sm.regs / kSubPartitions / kRegAllocation;
}

// Places the warps of one block of `units` a warp, each where the most is left; false (nothing changed)
// where one does not fit.
bool place_block(std::array<int, kSubPartitions>& left, int warps, int units) {
  std::array<int, kSubPartitions> next = left;
  for (int w = 0; w < warps; ++w) {
    int* most = std::max_element(next.begin(), next.end());
    if (*most < units) return false;
    *most -= units;
  }
  left = next;
  return true;
}

}  // namespace

int resident_blocks(const SmLimits& sm, int regs_per_thread, size_t static_smem, int threads,
                    size_t dynamic_smem) {
  const BlockFootprint b{regs_per_thread, static_smem + dynamic_smem, threads};
  const int warps = warps_of(b);
  const int by_regs = units_per_sub_partition(sm) / warp_units(b) * kSubPartitions / warps;
  const int by_smem = static_cast<int>(sm.smem / smem_of(sm, b));
  return std::max(0, std::min({by_regs, by_smem, sm.threads / (warps * 32), sm.blocks}));
}

BesideFit blocks_beside(const SmLimits& sm, const BlockFootprint& resident, int resident_blocks,
                        const BlockFootprint& incoming) {
  resident_blocks = std::max(resident_blocks, 0);
  std::array<int, kSubPartitions> units_left;
  units_left.fill(units_per_sub_partition(sm));
  for (int i = 0; i < resident_blocks; ++i)
    if (!place_block(units_left, warps_of(resident), warp_units(resident))) return {0, "registers"};
  const long smem_left =
      static_cast<long>(sm.smem) - resident_blocks * static_cast<long>(smem_of(sm, resident));
  const int threads_left = sm.threads - resident_blocks * warps_of(resident) * 32;
  const int slots_left = sm.blocks - resident_blocks;
  BesideFit fit{std::max(0, slots_left), "block slots"};
  auto bind = [&](long blocks, const char* what) {
    if (blocks < fit.blocks) fit = {static_cast<int>(std::max(0L, blocks)), what};
  };
  bind(smem_left < 0 ? 0 : smem_left / static_cast<long>(smem_of(sm, incoming)), "shared memory");
  bind(threads_left < 0 ? 0 : threads_left / (warps_of(incoming) * 32), "threads");
  int by_regs = 0;
  while (by_regs < fit.blocks && place_block(units_left, warps_of(incoming), warp_units(incoming))) ++by_regs;
  bind(by_regs, "registers");
  return fit;
}

EvenSpread spread_evenly(int blocks, int sms, int per_sm_limit) {
  sms = std::max(sms, 1);
  EvenSpread s;
  s.fewest = std::clamp(blocks / sms, 0, std::max(per_sm_limit, 0));
  const int extra = blocks - s.fewest * sms;
  const bool uneven = extra > 0 && s.fewest < per_sm_limit;
  s.most = uneven ? s.fewest + 1 : s.fewest;
  s.sms_with_most = uneven ? extra : sms;
  return s;
}

}  // namespace tpserve::kernels
