#include <sstream>

#include "runtime/backend/backend.h"

namespace tpserve {

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
  return os.str();
}

}  // namespace tpserve
