// Which tokenizer.json a served model uses: model.tokenizer when set; else <model.path>/tokenizer.json;
// else, for synthetic models (whose vocabulary is Qwen3's), the real Qwen3 tokenizer that
// launch/fetch-tokenizer puts at .deps/qwen3-tokenizer.json (looked up from the working directory, from
// the executable's directory and its parents, and in the source tree tpserve was built from).
#pragma once

#include <string>

#include "runtime/config/config.h"

namespace tpserve::serve {

struct TokenizerChoice {
  std::string path;     // empty: none found
  std::string missing;  // why none was found, with what to do (when path is empty)
};

// Throws tpserve::Error when model.tokenizer names a file that does not exist.
TokenizerChoice resolve_tokenizer_path(const ModelConfig& model);

}  // namespace tpserve::serve
