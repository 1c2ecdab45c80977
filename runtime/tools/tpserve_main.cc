// tpserve: the one executable. `tpserve --config X.yaml` serves; `tpserve generate ...` runs the model on
// token ids; `tpserve tokenize --text ...` prints token ids; `--check-config` prints the resolved config.
// Every error reaches this file, is logged with the rank, and brings every rank down (MPI_Abort) instead of
// leaving one waiting in a collective.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "common/error.h"
#include "common/log.h"
#include "parallel/mpi_session.h"
#include "runtime/config/config_parser.h"
#include "runtime/tools/commands.h"
#include "runtime/tools/main_guard.h"
#include "runtime/version.h"

namespace {

using tpserve::kExitConfigError;

int run(int argc, char** argv) {
  tpserve::CommandLine cl;
  CLI::App app{"tpserve: low-latency serving of Mixture-of-Experts models (Qwen3-MoE) on one GPU or many"};
  app.set_version_flag("--version", std::string("tpserve ") + tpserve::kVersion);
  app.add_option("--config", cl.config_path, "YAML config file (see docs/config.md)");
  app.add_option("--set", cl.overrides, "override a config key: --set runtime.max_batch=8 (repeatable)");
  app.add_flag("--check-config", cl.check_config, "validate the config, print it resolved, exit 0 (or 2)");
  app.add_flag(
      "--report-pdl", cl.report_pdl,
      "build the engine (graphs captured), print the PDL decision of every launch site and why, exit");
  app.add_flag(
      "--report-graphs", cl.report_graphs,
      "build the engine, print what each captured decode graph holds (nodes, edges, PDL edges per site)");
  tpserve::add_subcommands(app, cl);
  app.require_subcommand(0, 1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (cl.config_path.empty()) {
    std::fprintf(stderr, "tpserve: --config is required (try configs/tiny.yaml); see --help\n");
    return kExitConfigError;
  }
  tpserve::apply_log_level_env();
  tpserve::Config config;
  try {
    config = tpserve::load_config_file(cl.config_path, cl.overrides);
  } catch (const tpserve::ConfigError& e) {
    std::fprintf(stderr, "tpserve: %s\n", e.what());
    return kExitConfigError;
  }
  if (cl.check_config) {
    std::cout << tpserve::config_to_yaml(config);
    return 0;
  }
  tpserve::set_log_level(config.logging.level);
  tpserve::apply_log_level_env();
  return tpserve::run_command(cl, config, argc, argv);
}

}  // namespace

int main(int argc, char** argv) {
  return tpserve::run_guarded([&] { return run(argc, argv); });
}
