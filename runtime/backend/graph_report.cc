#include <sstream>

#include "runtime/backend/backend.h"

namespace tpserve {
namespace {

std::string describe(const KernelLaunchShape& k) {
  std::ostringstream os;
  os << k.kernel << " (" << k.blocks << " blocks of " << k.threads << " threads, " << k.regs << " regs, "
     << k.smem << " B)";
  return os.str();
}

std::string beside(int first, int sms, int blocks, const std::string& bound) {
  std::ostringstream os;
  os << "beside " << first << " (" << sms << " SMs): " << blocks;
  if (blocks == 0) os << " (" << bound << ")";
  return os.str();
}

}  // namespace

std::string GraphReport::format() const {
  std::ostringstream os;
  os << nodes << " nodes (" << kernel_nodes << " kernels), " << edges << " edges, " << programmatic_edges
     << " programmatic; captured in " << capture_ms << " ms, " << static_cast<double>(memory_bytes) / 1e6
     << " MB";
  for (const auto& [site, n] : kernels_per_site) {
    auto it = programmatic_edges_per_site.find(site);
    os << "\n    " << site << ": " << n << " kernels, "
       << (it == programmatic_edges_per_site.end() ? 0 : it->second) << " programmatic edges in";
  }
  if (!neighbours.empty())
    os << "\n  kernel -> next kernel (edges): blocks of the next an SM holds beside the first's";
  for (const auto& n : neighbours) {
    os << "\n    " << n.count << "x " << describe(n.first) << " -> " << describe(n.second) << ": "
       << beside(n.first_most, n.sms_with_most, n.beside_most, n.bound_most);
    if (n.first_fewest != n.first_most)
      os << "; " << beside(n.first_fewest, n.sms - n.sms_with_most, n.beside_fewest, n.bound_fewest);
  }
  return os.str();
}

}  // namespace tpserve
