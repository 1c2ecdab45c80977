// The subcommands of the tpserve executable (generate, ...) and the default action (serve).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "runtime/config/config.h"

namespace tpserve {

struct CommandLine {
  std::string config_path;
  std::vector<std::string> overrides;
  bool check_config = false;
};

void add_subcommands(CLI::App& app, CommandLine& cl);
// Runs the chosen subcommand (or serving when none was given); returns the process exit code.
int run_command(const CLI::App& app, const CommandLine& cl, const Config& config, int argc, char** argv);

}  // namespace tpserve
