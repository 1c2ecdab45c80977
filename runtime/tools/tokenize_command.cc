// `tpserve tokenize --config X --text "..."`: the token ids the served model's tokenizer gives a text, as
// POST /tokenize answers them ({"tokens": [...], "count": N}; max_model_len needs the engine, so it is left
// out), without loading the model or starting MPI.
#include <iostream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/log.h"
#include "runtime/serve/tokenizer.h"
#include "runtime/serve/tokenizer_path.h"
#include "runtime/tools/commands.h"
#include "runtime/tools/main_guard.h"

namespace tpserve {

int run_tokenize(const TokenizeArgs& args, const Config& config) {
  serve::TokenizerChoice choice;
  try {
    choice = serve::resolve_tokenizer_path(config.model);
  } catch (const Error& e) {  // model.tokenizer names no file
    log_error("tokenize: ", e.what());
    return kExitConfigError;
  }
  if (choice.path.empty()) {
    log_error("tokenize: no tokenizer: ", choice.missing);
    return kExitConfigError;
  }
  const std::vector<int32_t> ids = serve::Tokenizer::load(choice.path)->encode(args.text);
  nlohmann::ordered_json out;
  out["tokens"] = ids;
  out["count"] = ids.size();
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace tpserve
