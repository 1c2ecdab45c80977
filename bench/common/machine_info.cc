// Host name and CPUs from the OS (gethostname, the affinity mask, /proc/cpuinfo); UTC time via gmtime_r.
#include "bench/common/machine_info.h"

#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <thread>

namespace tpserve::bench {

MachineInfo machine_info() {
  MachineInfo m;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) m.hostname = host;
  cpu_set_t set;
  m.nproc = sched_getaffinity(0, sizeof(set), &set) == 0
                ? CPU_COUNT(&set)
                : static_cast<int>(std::thread::hardware_concurrency());
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) m.cpu_model = line.substr(line.find_first_not_of(' ', colon + 1));
    break;
  }
  return m;
}

nlohmann::json to_json(const MachineInfo& info) {
  return {{"hostname", info.hostname}, {"nproc", info.nproc}, {"cpu_model", info.cpu_model}};
}

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace tpserve::bench
