// The parallel layouts the multi-rank tests run, as config overrides for np ranks: MoE TP-sharded, or
// expert-parallel with all-reduce or all-to-all dispatch (attention is tensor-parallel in all three).
#pragma once

#include <string>
#include <vector>

namespace tpserve::testing_util {

struct Layout {
  const char* name;
  std::vector<std::string> (*overrides)(int np);
  // Whether it applies to np ranks and a model of num_experts experts (expert parallelism divides them).
  bool fits(int np, int num_experts) const {
    return num_experts % np == 0 || name == std::string("tp_sharded_moe");
  }
};
inline const Layout kLayouts[] = {
    {"tp_sharded_moe", [](int np) { return std::vector<std::string>{"parallel.tp=" + std::to_string(np)}; }},
    {"ep_allreduce",
     [](int np) {
       const std::string n = std::to_string(np);
       return std::vector<std::string>{"parallel.tp=" + n, "parallel.ep=" + n, "parallel.moe.parallel=ep",
                                       "parallel.moe.dispatch=allreduce"};
     }},
    {"ep_alltoall",
     [](int np) {
       const std::string n = std::to_string(np);
       return std::vector<std::string>{"parallel.tp=" + n, "parallel.ep=" + n, "parallel.moe.parallel=ep",
                                       "parallel.moe.dispatch=alltoall"};
     }},
};

}  // namespace tpserve::testing_util
