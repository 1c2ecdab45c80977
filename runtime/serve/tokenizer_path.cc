#include "runtime/serve/tokenizer_path.h"

#include <filesystem>
#include <system_error>
#include <vector>

#include "common/error.h"

namespace tpserve::serve {
namespace {

namespace fs = std::filesystem;
constexpr const char* kFetched = ".deps/qwen3-tokenizer.json";

std::vector<fs::path> search_roots() {
  std::vector<fs::path> roots;
  std::error_code ec;
  roots.push_back(fs::current_path(ec));
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path dir = exe.parent_path(); !dir.empty() && roots.size() < 6; dir = dir.parent_path()) {
      roots.push_back(dir);
      if (dir == dir.root_path()) break;
    }
#ifdef TPSERVE_SOURCE_DIR
  roots.push_back(TPSERVE_SOURCE_DIR);
#endif
  return roots;
}

}  // namespace

TokenizerChoice resolve_tokenizer_path(const ModelConfig& model) {
  if (!model.tokenizer.empty()) {
    TPS_CHECK(fs::is_regular_file(model.tokenizer), "model.tokenizer: ", model.tokenizer,
              " does not exist or is not a file");
    return {model.tokenizer, ""};
  }
  if (!model.path.empty()) {
    const fs::path candidate = fs::path(model.path) / "tokenizer.json";
    if (fs::is_regular_file(candidate)) return {candidate.string(), ""};
    return {"", candidate.string() + " does not exist and model.tokenizer is not set"};
  }
  for (const fs::path& root : search_roots()) {
    const fs::path candidate = root / kFetched;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec)) return {candidate.lexically_normal().string(), ""};
  }
  return {"", std::string("the synthetic model uses Qwen3's tokenizer, but ") + kFetched +
                  " was not found (run launch/fetch-tokenizer in the source tree, or set model.tokenizer)"};
}

}  // namespace tpserve::serve
