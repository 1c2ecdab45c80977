// Checkpoint directories: single file, sharded with an index, every inconsistency between the index and
// the shards, reading through WeightSource&, and the unexpected-tensor warning.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/log.h"
#include "runtime/weights/checkpoint.h"
#include "tests/model/weights_test_util.h"

namespace tpserve {
namespace {

using testing_util::add_bf16;
using testing_util::add_f32;
using testing_util::error_of;
using testing_util::iota_floats;
using testing_util::raw_safetensors;
using testing_util::TempDir;
using testing_util::write_bytes;

// Writes a 3-shard checkpoint: shard k holds "layer.k.weight" [2, 3] (bf16 from k*10) and "layer.k.bias".
std::map<std::string, std::string> write_sharded(const TempDir& dir, int shards = 3) {
  std::map<std::string, std::string> weight_map;
  uint64_t total = 0;
  for (int k = 0; k < shards; ++k) {
    const std::string file =
        "model-0000" + std::to_string(k + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
    SafetensorsWriter writer;
    std::vector<float> weight = iota_floats(6);
    for (float& v : weight) v += static_cast<float>(k * 10);
    add_bf16(writer, "layer." + std::to_string(k) + ".weight", {2, 3}, weight);
    add_f32(writer, "layer." + std::to_string(k) + ".bias", {3}, {1.0f, 2.0f, static_cast<float>(k)});
    writer.write(dir.file(file));
    total += writer.data_bytes();
    weight_map["layer." + std::to_string(k) + ".weight"] = file;
    weight_map["layer." + std::to_string(k) + ".bias"] = file;
  }
  write_index_json(dir.path(), weight_map, total);
  return weight_map;
}

TEST(Checkpoint, SingleFile) {
  TempDir dir;
  SafetensorsWriter writer;
  add_f32(writer, "a", {2, 2}, iota_floats(4));
  add_bf16(writer, "b", {4}, iota_floats(4));
  writer.write(dir.file("model.safetensors"));
  const Checkpoint ckpt(dir.path());
  EXPECT_EQ(ckpt.num_shards(), 1u);
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ckpt.describe(), "checkpoint " + dir.path() + " (1 shard, 2 tensors, 24 B)");
  EXPECT_EQ(ckpt.read_all_f32("b"), iota_floats(4));
}

TEST(Checkpoint, ThreeShardsReadThroughWeightSource) {
  TempDir dir;
  write_sharded(dir);
  const Checkpoint ckpt(dir.path());
  const WeightSource& source = ckpt;
  EXPECT_EQ(ckpt.num_shards(), 3u);
  EXPECT_EQ(source.names().size(), 6u);
  EXPECT_TRUE(source.has("layer.2.bias"));
  EXPECT_FALSE(source.has("layer.3.bias"));
  EXPECT_EQ(source.meta("layer.1.weight").dtype, DType::kBF16);
  EXPECT_EQ(source.meta("layer.1.weight").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(source.read_all_f32("layer.2.bias"), (std::vector<float>{1.0f, 2.0f, 2.0f}));
  float column[2];
  source.read("layer.1.weight", std::vector<Range>{{0, 2}, {1, 2}}, DType::kF32, column);
  EXPECT_EQ(column[0], 11.0f);
  EXPECT_EQ(column[1], 14.0f);
  EXPECT_NE(ckpt.shard_of("layer.1.weight").path().find("model-00002-of-00003.safetensors"),
            std::string::npos);
  EXPECT_EQ(source.describe(), "checkpoint " + dir.path() + " (3 shards, 6 tensors, 72 B)");
}

TEST(Checkpoint, MissingTensorNamesTensorAndDirectory) {
  TempDir dir;
  write_sharded(dir);
  const Checkpoint ckpt(dir.path());
  const std::string msg = error_of([&] { ckpt.meta("lm_head.weight"); });
  EXPECT_NE(msg.find("tensor 'lm_head.weight' is not in checkpoint " + dir.path()), std::string::npos) << msg;
}

TEST(Checkpoint, MissingDirectory) {
  const std::string msg = error_of([] { Checkpoint ckpt("/nonexistent/ckpt"); });
  EXPECT_NE(msg.find("checkpoint directory /nonexistent/ckpt does not exist"), std::string::npos) << msg;
}

TEST(Checkpoint, PathIsAFile) {
  TempDir dir;
  write_bytes(dir.file("config.json"), "{}");
  const std::string msg = error_of([&] { Checkpoint ckpt(dir.file("config.json")); });
  EXPECT_NE(msg.find("config.json is not a directory"), std::string::npos) << msg;
}

TEST(Checkpoint, NeitherIndexNorSingleFile) {
  TempDir dir;
  write_bytes(dir.file("pytorch_model.bin"), "x");
  const std::string msg = error_of([&] { Checkpoint ckpt(dir.path()); });
  EXPECT_NE(msg.find(dir.path() + " has neither model.safetensors.index.json nor model.safetensors"),
            std::string::npos)
      << msg;
}

// A folder holding a single file and an index (one of them left from another checkpoint) is ambiguous.
TEST(Checkpoint, BothSingleFileAndIndexAreRefused) {
  TempDir dir;
  SafetensorsWriter writer;
  add_f32(writer, "a", {2}, iota_floats(2));
  writer.write(dir.file("model.safetensors"));
  write_bytes(dir.file("model.safetensors.index.json"), R"({"weight_map": {}})");
  const std::string msg = error_of([&] { Checkpoint ckpt(dir.path()); });
  EXPECT_NE(msg.find("has both model.safetensors and model.safetensors.index.json"), std::string::npos)
      << msg;
}

TEST(Checkpoint, MalformedIndexJson) {
  TempDir dir;
  write_bytes(dir.file("model.safetensors.index.json"), R"({"weight_map": {"a": "x.safetensors",}})");
  const std::string msg = error_of([&] { Checkpoint ckpt(dir.path()); });
  EXPECT_NE(msg.find("model.safetensors.index.json: malformed JSON: [json.exception.parse_error"),
            std::string::npos)
      << msg;
}

TEST(Checkpoint, IndexWithoutWeightMap) {
  TempDir dir;
  write_bytes(dir.file("model.safetensors.index.json"), R"({"metadata": {"total_size": 0}})");
  const std::string msg = error_of([&] { Checkpoint ckpt(dir.path()); });
  EXPECT_NE(msg.find("model.safetensors.index.json: no \"weight_map\" object"), std::string::npos) << msg;
}

TEST(Checkpoint, IndexNamesAMissingShard) {
  TempDir dir;
  write_sharded(dir);
  std::filesystem::remove(dir.file("model-00002-of-00003.safetensors"));
  const std::string msg = error_of([&] { Checkpoint ckpt(dir.path()); });
  EXPECT_NE(
      msg.find("shard file model-00002-of-00003.safetensors (holding 'layer.1.bias' and 1 more tensors) is "
               "missing from " +
               dir.path()),
      std::string::npos)
      << msg;
}

TEST(Checkpoint, IndexedTensorAbsentFromItsShard) {
  TempDir dir;
  std::map<std::string, std::string> weight_map = write_sharded(dir);
  weight_map["layer.9.weight"] = "model-00003-of-00003.safetensors";
  write_index_json(dir.path(), weight_map, 0);
  const std::string msg = error_of([&] { Checkpoint ckpt(dir.path()); });
  EXPECT_NE(msg.find("tensor 'layer.9.weight' is mapped to model-00003-of-00003.safetensors, which does not "
                     "contain it"),
            std::string::npos)
      << msg;
}

TEST(Checkpoint, SameTensorInTwoShards) {
  TempDir dir;
  write_sharded(dir);
  SafetensorsWriter writer;  // shard 3 also carries layer.0.bias
  add_bf16(writer, "layer.2.weight", {2, 3}, iota_floats(6));
  add_f32(writer, "layer.2.bias", {3}, iota_floats(3));
  add_f32(writer, "layer.0.bias", {3}, iota_floats(3));
  writer.write(dir.file("model-00003-of-00003.safetensors"));
  const std::string msg = error_of([&] { Checkpoint ckpt(dir.path()); });
  EXPECT_NE(
      msg.find("tensor 'layer.0.bias' is in two shards: " + dir.file("model-00001-of-00003.safetensors") +
               " and " + dir.file("model-00003-of-00003.safetensors")),
      std::string::npos)
      << msg;
}

TEST(Checkpoint, BrokenShardIsNamed) {
  TempDir dir;
  write_sharded(dir);
  write_bytes(dir.file("model-00002-of-00003.safetensors"), raw_safetensors("{", 0));
  const std::string msg = error_of([&] { Checkpoint ckpt(dir.path()); });
  EXPECT_NE(msg.find(dir.file("model-00002-of-00003.safetensors") + ": malformed header JSON"),
            std::string::npos)
      << msg;
}

TEST(Checkpoint, ShardNameEscapingTheDirectoryIsRefused) {
  TempDir dir;
  write_index_json(dir.path(), {{"a", "../elsewhere.safetensors"}}, 0);
  const std::string msg = error_of([&] { Checkpoint ckpt(dir.path()); });
  EXPECT_NE(msg.find("shard name '../elsewhere.safetensors' must be a relative path inside"),
            std::string::npos)
      << msg;
}

TEST(Checkpoint, WarnsAboutUnexpectedTensors) {
  TempDir dir;
  SafetensorsWriter writer;
  for (int i = 0; i < 14; ++i) add_f32(writer, "extra." + std::to_string(10 + i), {1}, {0.0f});
  add_f32(writer, "model.norm.weight", {1}, {1.0f});
  writer.write(dir.file("model.safetensors"));
  const Checkpoint ckpt(dir.path());
  set_log_level(LogLevel::kInfo);

  testing::internal::CaptureStderr();
  warn_unexpected_tensors(ckpt, {"model.norm.weight"});
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("warn"), std::string::npos) << out;
  EXPECT_NE(
      out.find(ckpt.describe() + ": 14 unexpected tensors, not used by the model: extra.10, extra.11, "),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("extra.19, ... (4 more)"), std::string::npos) << out;
  EXPECT_EQ(out.find("extra.20"), std::string::npos) << out;
  EXPECT_EQ(out.find("model.norm.weight,"), std::string::npos) << out;

  std::vector<std::string> everything = ckpt.names();
  testing::internal::CaptureStderr();
  warn_unexpected_tensors(ckpt, everything);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace tpserve
