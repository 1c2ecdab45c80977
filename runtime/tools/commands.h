// The subcommands of the tpserve executable and the default action (serve).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "runtime/config/config.h"

namespace tpserve {

struct GenerateArgs {
  std::string prompt_ids;  // "1,2,3"
  int max_tokens = 16;
  double temperature = 0.0;
  double top_p = 1.0;
  int top_k = 0;
  double min_p = 0.0;
  int64_t seed = 0;
  bool ignore_eos = false;
};

struct TokenizeArgs {
  std::string text;
};

struct CommandLine {
  std::string config_path;
  std::vector<std::string> overrides;
  bool check_config = false;
  bool report_pdl = false;
  bool report_graphs = false;
  CLI::App* generate = nullptr;
  GenerateArgs gen;
  CLI::App* tokenize = nullptr;
  TokenizeArgs tok;
};

void add_subcommands(CLI::App& app, CommandLine& cl);
// Runs the chosen subcommand (or serving when none was given); returns the process exit code.
int run_command(const CommandLine& cl, const Config& config, int argc, char** argv);

// Individual commands (each in its own file).
int run_generate(const GenerateArgs& args, const Config& config);
int run_reports(const CommandLine& cl, const Config& config);
int run_serve(const Config& config);
int run_tokenize(const TokenizeArgs& args, const Config& config);

}  // namespace tpserve
