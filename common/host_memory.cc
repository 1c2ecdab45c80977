#include "common/host_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace tpserve {

std::optional<size_t> available_host_memory() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string name, unit;
    size_t kib = 0;
    if (fields >> name >> kib >> unit && name == "MemAvailable:" && unit == "kB") return kib * 1024;
  }
  return std::nullopt;
}

}  // namespace tpserve
