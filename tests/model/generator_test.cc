// tpserve-gen's writer: a sharded checkpoint that loads through Checkpoint with exactly the values of
// SyntheticWeights (same preset and seed), the MTP head when asked, and a model that runs from it.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"
#include "model_test_util.h"
#include "parallel/communicator.h"
#include "runtime/engine/engine.h"
#include "runtime/model/weight_names.h"
#include "runtime/weights/checkpoint.h"
#include "runtime/weights/checkpoint_generator.h"
#include "runtime/weights/synthetic_weights.h"

namespace tpserve {
namespace {

std::string temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir.string();
}

TEST(CheckpointGenerator, ShardedCheckpointHoldsTheSyntheticValues) {
  ModelSpec spec = preset_model_spec("tiny", 2, 1024);
  spec.num_nextn_predict_layers = 1;
  const std::string dir = temp_dir("tpserve_gen");
  const int shards = write_synthetic_checkpoint(spec, dir, {.seed = 11, .shard_bytes = 200'000});
  EXPECT_GT(shards, 1);
  EXPECT_TRUE(std::filesystem::exists(dir + "/model.safetensors.index.json"));

  Checkpoint ckpt(dir);
  SyntheticWeights synthetic(spec, 11);
  EXPECT_EQ(ckpt.num_shards(), static_cast<size_t>(shards));
  const auto expected = expected_tensors(spec, ExpertLayout::kPerExpert);
  EXPECT_EQ(ckpt.names().size(), expected.size());
  for (const auto& t : expected) {
    ASSERT_TRUE(ckpt.has(t.name)) << t.name;
    EXPECT_EQ(ckpt.meta(t.name).dtype, DType::kBF16);
    EXPECT_EQ(ckpt.read_all_f32(t.name), synthetic.read_all_f32(t.name)) << t.name;
  }
  EXPECT_TRUE(ckpt.has("mtp.fc.weight"));

  const ModelSpec loaded = load_model_spec(dir);
  EXPECT_EQ(loaded.vocab_size, 1024);
  EXPECT_EQ(loaded.num_nextn_predict_layers, 1);
  EXPECT_EQ(loaded.num_parameters(), spec.num_parameters());

  auto comm = parallel::make_single_rank_communicator();
  Engine engine(testing_util::make_config("model: {path: " + dir + "}"), *comm, make_cpu_backend());
  EXPECT_EQ(engine.generate({1, 2, 3}, SamplingParams{}, 5, true).size(), 5u);
  std::filesystem::remove_all(dir);
}

TEST(CheckpointGenerator, SameSeedSameCheckpointDifferentSeedDifferent) {
  const ModelSpec spec = preset_model_spec("tiny", 1, 256);
  const std::string a = temp_dir("tpserve_gen_a"), b = temp_dir("tpserve_gen_b");
  write_synthetic_checkpoint(spec, a, {.seed = 1});
  write_synthetic_checkpoint(spec, b, {.seed = 2});
  Checkpoint ca(a), cb(b);
  const std::string name = weight_names::layer_prefix(0) + "self_attn.q_proj.weight";
  EXPECT_NE(ca.read_all_f32(name), cb.read_all_f32(name));
  EXPECT_EQ(ca.read_all_f32(name), SyntheticWeights(spec, 1).read_all_f32(name));
  // Writing into a folder that holds a checkpoint would mix the two: refused, the old one untouched.
  try {
    write_synthetic_checkpoint(spec, a, {.seed = 3});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already holds a checkpoint"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Checkpoint(a).read_all_f32(name), SyntheticWeights(spec, 1).read_all_f32(name));
  std::filesystem::remove_all(a);
  std::filesystem::remove_all(b);
}

}  // namespace
}  // namespace tpserve
