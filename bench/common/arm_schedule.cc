// Even rounds run the arms in order, odd rounds reversed.
#include "bench/common/arm_schedule.h"

#include "common/error.h"

namespace tpserve::bench {

std::vector<int> arm_order(int num_arms, int round) {
  TPS_CHECK(num_arms >= 1 && round >= 0, "arm_order(", num_arms, ", ", round, ")");
  std::vector<int> order(num_arms);
  for (int i = 0; i < num_arms; ++i) order[i] = round % 2 == 0 ? i : num_arms - 1 - i;
  return order;
}

std::vector<ScheduledRun> sweep_schedule(const std::vector<int>& concurrency, int rounds, int num_arms) {
  std::vector<ScheduledRun> runs;
  for (int c : concurrency)
    for (int r = 0; r < rounds; ++r) {
      const std::vector<int> order = arm_order(num_arms, r);
      for (int p = 0; p < num_arms; ++p) runs.push_back({c, r, order[p], p});
    }
  return runs;
}

}  // namespace tpserve::bench
