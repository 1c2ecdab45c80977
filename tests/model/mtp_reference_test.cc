// The MTP head against REFERENCE.md's formula, on the CPU backend. For each prompt position i, with the main
// model's final-normed hidden state h_i and the next token t_{i+1}:
//   u_i = fc(cat(norm_e(embed(t_{i+1})), norm_h(h_i)))   (embedding first)
// then the MTP decoder layer (its own KV cache), mtp.norm and the shared lm_head give the draft.
// The test gets h_i from the main model with lm_head replaced by [I; 0] (its logits are then h_i), computes
// u_i by hand, and runs a one-layer model whose layer, final norm and lm_head are the MTP head's and whose
// embedding row i is u_i, over the token ids 0..n-1. Its KV cache must equal the MTP layer's, and its
// argmax at the last position must be the MTP head's first draft.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "parallel/communicator.h"
#include "runtime/engine/engine.h"
#include "tests/model/model_test_util.h"
#include "tests/model/mtp_fixture.h"

namespace tpserve {
namespace {

using namespace testing_util;
namespace fs = std::filesystem;

// A copy of checkpoint `src` (its config.json edited by `edit`) whose tensors are `tensors`.
std::string write_checkpoint(
    const std::string& src, const std::string& tag,
    const std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>& tensors,
    const std::function<void(nlohmann::json&)>& edit) {
  const std::string dir =
      (fs::temp_directory_path() / ("tpserve_mtpref_" + tag + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(src + "/generation_config.json", dir + "/generation_config.json");
  nlohmann::json config = nlohmann::json::parse(std::ifstream(src + "/config.json"));
  edit(config);
  std::ofstream(dir + "/config.json") << config.dump(2);
  SafetensorsWriter writer;
  for (const auto& [name, t] : tensors)
    writer.add(name, DType::kF32, t.first, t.second.data(), t.second.size() * 4);
  writer.write(dir + "/model.safetensors");
  return dir;
}

std::vector<float> rmsnorm(const float* x, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (size_t i = 0; i < w.size(); ++i) ss += double(x[i]) * x[i];
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(w.size()) + eps);
  std::vector<float> y(w.size());
  for (size_t i = 0; i < w.size(); ++i) y[i] = static_cast<float>(w[i] * (x[i] * r));
  return y;
}

TEST(MtpReference, KvCacheAndFirstDraftFollowTheFormula) {
  const std::string dir = fixture_with_mtp("gqa4");
  const Checkpoint ckpt(dir);
  const ModelSpec spec = load_model_spec(dir);
  const int64_t H = spec.hidden_size, V = spec.vocab_size;
  const std::vector<int32_t> prompt = load_reference("gqa4").prompt;
  const int n = static_cast<int>(prompt.size());
  const std::string model = "model: {path: " + dir + "}";

  // The main model's first greedy token, and the MTP head's state after the prefill.
  const int32_t g0 = EngineRun(make_config(model)).engine->generate(prompt, SamplingParams{}, 1, true).at(0);
  EngineRun mtp(make_config(model, {"speculative.method=mtp", "speculative.num_speculative_tokens=1"}));
  ASSERT_EQ(mtp.engine->generate(prompt, SamplingParams{}, 1, true).at(0), g0);
  const std::vector<float> mtp_kv = kv_positions(mtp.engine->model().kv_cache(-1), n);
  const int32_t draft = mtp.engine->model().drafts_of_slot(0).at(0);

  // h_i: the main model with lm_head = [I; 0].
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> main_tensors;
  for (const auto& name : ckpt.names())
    if (name.rfind("mtp.", 0) != 0) main_tensors[name] = {ckpt.meta(name).shape, ckpt.read_all_f32(name)};
  std::vector<float> eye(V * H, 0.0f);
  for (int64_t i = 0; i < H; ++i) eye[i * H + i] = 1.0f;
  main_tensors["lm_head.weight"].second = eye;
  const std::string dir_h =
      write_checkpoint(dir, "h", main_tensors, [](nlohmann::json& c) { c["num_nextn_predict_layers"] = 0; });
  const StepResult hidden =
      EngineRun(make_config("model: {path: " + dir_h + "}",
                            {"runtime.max_num_batched_tokens=64", "runtime.max_batch=32"}),
                EngineOptions{.keep_logits = true})
          .engine->run_batch(sequence_step(prompt, 0, n, 4, true), true);
  ASSERT_EQ(hidden.logits.size(), static_cast<size_t>(n * V));

  // u_i by the formula.
  const std::vector<float> embed = ckpt.read_all_f32("model.embed_tokens.weight"),
                           fc = ckpt.read_all_f32("mtp.fc.weight"),
                           norm_e = ckpt.read_all_f32("mtp.pre_fc_norm_embedding.weight"),
                           norm_h = ckpt.read_all_f32("mtp.pre_fc_norm_hidden.weight");
  ASSERT_EQ(fc.size(), static_cast<size_t>(H * 2 * H));
  std::vector<float> u_rows(V * H, 0.0f);
  for (int i = 0; i < n; ++i) {
    const int32_t next = i + 1 < n ? prompt[i + 1] : g0;
    const std::vector<float> e = rmsnorm(&embed[next * H], norm_e, spec.rms_norm_eps);
    const std::vector<float> h = rmsnorm(&hidden.logits[i * V], norm_h, spec.rms_norm_eps);
    for (int64_t r = 0; r < H; ++r) {
      double acc = 0;
      for (int64_t c = 0; c < H; ++c)
        acc += double(fc[r * 2 * H + c]) * e[c] + double(fc[r * 2 * H + H + c]) * h[c];
      u_rows[i * H + r] = static_cast<float>(acc);
    }
  }

  // The one-layer model made of the MTP head, fed u_i through its embedding (token id i).
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> layer_tensors;
  for (const auto& name : ckpt.names()) {
    const std::string prefix = "mtp.layers.0.";
    if (name.rfind(prefix, 0) == 0)
      layer_tensors["model.layers.0." + name.substr(prefix.size())] = {ckpt.meta(name).shape,
                                                                       ckpt.read_all_f32(name)};
  }
  layer_tensors["model.norm.weight"] = {{H}, ckpt.read_all_f32("mtp.norm.weight")};
  layer_tensors["lm_head.weight"] = {{V, H}, ckpt.read_all_f32("lm_head.weight")};
  layer_tensors["model.embed_tokens.weight"] = {{V, H}, u_rows};
  const std::string dir_r = write_checkpoint(dir, "layer", layer_tensors, [](nlohmann::json& c) {
    c["num_hidden_layers"] = 1;
    c["num_nextn_predict_layers"] = 0;
    c["mlp_only_layers"] = nlohmann::json::array();
    c["decoder_sparse_step"] = 1;
  });
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = i;
  EngineRun layer(make_config("model: {path: " + dir_r + "}",
                              {"runtime.max_num_batched_tokens=64", "runtime.max_batch=32"}),
                  EngineOptions{.keep_logits = true});
  const StepResult ref = layer.engine->run_batch(sequence_step(ids, 0, n, 4, true), true);
  const std::vector<float> ref_kv = kv_positions(layer.engine->model().kv_cache(0), n);

  ASSERT_EQ(ref_kv.size(), mtp_kv.size());
  EXPECT_LT(relative_l2(mtp_kv.data(), ref_kv.data(), static_cast<int64_t>(ref_kv.size())), 1e-5);
  const float* last = &ref.logits[static_cast<size_t>(n - 1) * V];
  EXPECT_EQ(draft, static_cast<int32_t>(std::max_element(last, last + V) - last));
  for (const std::string& d : {dir, dir_h, dir_r}) fs::remove_all(d);
}

}  // namespace
}  // namespace tpserve
