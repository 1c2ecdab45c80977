#include "runtime/tools/commands.h"

#include "common/log.h"
#include "parallel/mpi_session.h"
#include "runtime/tools/main_guard.h"

namespace tpserve {

void add_subcommands(CLI::App& app, CommandLine& cl) {
  cl.generate = app.add_subcommand("generate", "generate from prompt token ids and print the new token ids");
  auto* g = cl.generate;
  g->add_option("--prompt-ids", cl.gen.prompt_ids, "comma-separated prompt token ids, e.g. 1,2,3")
      ->required();
  g->add_option("--max-tokens", cl.gen.max_tokens, "tokens to generate")->check(CLI::Range(1, 1 << 20));
  g->add_option("--temperature", cl.gen.temperature, "0 = greedy")->check(CLI::Range(0.0, 2.0));
  g->add_option("--top-p", cl.gen.top_p)->check(CLI::Range(1e-6, 1.0));
  g->add_option("--top-k", cl.gen.top_k, "0 = off")->check(CLI::Range(0, 1 << 20));
  g->add_option("--min-p", cl.gen.min_p)->check(CLI::Range(0.0, 1.0));
  g->add_option("--seed", cl.gen.seed);
  g->add_flag("--ignore-eos", cl.gen.ignore_eos, "keep generating past end-of-sequence tokens");

  cl.tokenize = app.add_subcommand(
      "tokenize",
      "print the token ids of a text as JSON ({\"tokens\": [...], \"count\": N}); no model, no MPI");
  cl.tokenize->add_option("--text", cl.tok.text, "the text to tokenize")->required();
  cl.tokenize->fallthrough();  // `tpserve tokenize --config X --text ...` works too
}

int run_command(const CommandLine& cl, const Config& config, int argc, char** argv) {
  if (cl.tokenize->parsed()) {
#if TPSERVE_HAVE_SERVER
    return run_tokenize(cl.tok, config);
#else
    log_error("this tpserve was built without the HTTP server and its tokenizer (-DTPSERVE_SERVER=OFF)");
    return kExitConfigError;
#endif
  }
  parallel::MpiSession mpi(&argc, &argv);
  if (cl.report_pdl || cl.report_graphs) return run_reports(cl, config);
  if (cl.generate->parsed()) return run_generate(cl.gen, config);
#if TPSERVE_HAVE_SERVER
  return run_serve(config);
#else
  log_error("this tpserve was built without the HTTP server (-DTPSERVE_SERVER=OFF); use `tpserve generate`");
  return kExitConfigError;
#endif
}

}  // namespace tpserve
