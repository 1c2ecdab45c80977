// The only file that includes the generated header, so a new commit recompiles one file.
#include "bench/common/build_info.h"

#include "bench/build_info_values.h"

namespace tpserve::bench {

BuildInfo build_info() {
  const std::string cuda = TPSERVE_BENCH_CUDA;
  return BuildInfo{.git_describe = TPSERVE_BENCH_GIT_DESCRIBE,
                   .compiler = TPSERVE_BENCH_COMPILER,
                   .cuda = cuda == "ON" || cuda == "TRUE" || cuda == "1",
                   .build_type = TPSERVE_BENCH_BUILD_TYPE};
}

nlohmann::json to_json(const BuildInfo& info) {
  return {{"git_describe", info.git_describe},
          {"compiler", info.compiler},
          {"cuda", info.cuda},
          {"build_type", info.build_type}};
}

}  // namespace tpserve::bench
