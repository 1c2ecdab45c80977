#include "runtime/tools/commands.h"

#include "common/log.h"
#include "parallel/mpi_session.h"

namespace tpserve {

void add_subcommands(CLI::App& app, CommandLine& cl) {
  (void)app;
  (void)cl;
}

int run_command(const CLI::App& app, const CommandLine& cl, const Config& config, int argc, char** argv) {
  (void)app;
  (void)cl;
  parallel::MpiSession mpi(&argc, &argv);
  log_info("config ", config.source, " is valid; the model and the server are not built yet (issues 3 and 9)");
  return 2;
}

}  // namespace tpserve
