// tpserve-gen: writes a synthetic Qwen3-MoE checkpoint directory (deterministic random bf16 weights).
//   tpserve-gen --preset tiny|small|qwen3-30b-a3b [--layers N] [--vocab N] [--mtp] --seed S --out DIR
#include <CLI/CLI.hpp>

#include <cstdio>
#include <limits>

#include "common/error.h"
#include "common/log.h"
#include "runtime/tools/cli_validators.h"
#include "runtime/version.h"
#include "runtime/weights/checkpoint_generator.h"

int main(int argc, char** argv) {
  std::string preset = "tiny", out, tokenizer;
  int layers = 0, vocab = 0;
  bool mtp = false;
  uint64_t seed = 0;
  double shard_gb = 2.0;
  CLI::App app{"tpserve-gen: write a synthetic Qwen3-MoE checkpoint (config.json, sharded bf16 safetensors)"};
  app.set_version_flag("--version", std::string("tpserve-gen ") + tpserve::kVersion);
  app.add_option("--preset", preset, "tiny | small | qwen3-30b-a3b")
      ->check(CLI::IsMember({"tiny", "small", "qwen3-30b-a3b"}));
  app.add_option("--layers", layers, "layers (0 = the preset's)")->check(CLI::Range(0, 1024));
  app.add_option("--vocab", vocab, "vocabulary size (0 = the preset's)")->check(CLI::Range(0, 1 << 22));
  app.add_flag("--mtp", mtp, "add an MTP head (mtp.* tensors, num_nextn_predict_layers 1)");
  app.add_option("--seed", seed,
                 "weights are a function of the seed (0 .. 2^63 - 1, as model.synthetic.seed)")
      ->required()
      ->check(tpserve::non_negative_integer());
  app.add_option("--out", out, "output directory")->required();
  app.add_option("--tokenizer", tokenizer, "tokenizer.json to copy into the checkpoint")
      ->check(CLI::ExistingFile);
  app.add_option("--shard-gb", shard_gb, "shard size in GB")->check(CLI::Range(0.001, 1000.0));
  CLI11_PARSE(app, argc, argv);
  if (seed > uint64_t(std::numeric_limits<int64_t>::max())) {
    std::fprintf(stderr, "--seed: %llu is beyond 2^63 - 1, which model.synthetic.seed cannot repeat\n",
                 static_cast<unsigned long long>(seed));
    return 2;
  }
  try {
    tpserve::apply_log_level_env();
    tpserve::ModelSpec spec = tpserve::preset_model_spec(preset, layers, vocab);
    if (mtp) spec.num_nextn_predict_layers = 1;
    tpserve::write_synthetic_checkpoint(
        spec, out,
        {.seed = seed, .shard_bytes = static_cast<uint64_t>(shard_gb * 1e9), .tokenizer = tokenizer});
    return 0;
  } catch (const std::exception& e) {
    tpserve::log_error("tpserve-gen: ", e.what());
    return 1;
  }
}
