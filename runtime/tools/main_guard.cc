#include "runtime/tools/main_guard.h"

#include <exception>

#include "common/log.h"
#include "parallel/mpi_session.h"
#include "runtime/config/config_parser.h"

namespace tpserve {

int run_guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const ConfigError& e) {
    log_error(e.what());
    parallel::abort_all_ranks(kExitConfigError);
    return kExitConfigError;
  } catch (const std::exception& e) {
    log_error("fatal: ", e.what());
    parallel::abort_all_ranks(1);
    return 1;
  }
}

}  // namespace tpserve
