// BuildInfo: which build produced a benchmark's numbers (git describe, compiler, CUDA on/off, build type),
// from a header the build writes (bench/cmake/write_build_info.cmake), so that every JSON result names it.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace tpserve::bench {

struct BuildInfo {
  std::string git_describe;  // `git describe --always --dirty --tags` at build time
  std::string compiler;      // "GNU 12.2.0"
  bool cuda = false;         // built with the CUDA backend
  std::string build_type;    // CMAKE_BUILD_TYPE
};

BuildInfo build_info();
nlohmann::json to_json(const BuildInfo& info);

}  // namespace tpserve::bench
