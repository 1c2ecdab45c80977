// MachineInfo: where a benchmark ran (host name, CPU count and model) and when (UTC), for its JSON record.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace tpserve::bench {

struct MachineInfo {
  std::string hostname;
  int nproc = 0;          // CPUs this process may run on
  std::string cpu_model;  // from /proc/cpuinfo; empty where unknown
};

MachineInfo machine_info();
nlohmann::json to_json(const MachineInfo& info);
// Now, as ISO 8601 UTC: 2026-11-30T15:31:11Z.
std::string utc_timestamp();

}  // namespace tpserve::bench
