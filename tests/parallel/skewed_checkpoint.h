// A checkpoint whose routing is as skewed as it gets: a model (the gqa4 fixture unless told) with every
// router weight zero, so
// softmax is uniform, ties go to the smaller index, and every token picks experts 0 and 1 (held by rank 0
// under expert parallelism). All-to-all dispatch must carry every (token, slot) there and back.
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "runtime/weights/checkpoint.h"
#include "runtime/weights/safetensors_writer.h"
#include "tests/model/model_test_util.h"

namespace tpserve::testing_util {

// Collective: rank 0 writes the checkpoint into a fresh temporary directory; every rank gets its path.
// The caller removes it (rank 0, after a barrier). `source` (a checkpoint directory) is read on rank 0.
inline std::string write_skewed_checkpoint(const std::string& source = fixture_dir("gqa4")) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string dir;
  if (rank == 0) {
    dir =
        (std::filesystem::temp_directory_path() / ("tpserve_skewed_" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(dir);
    const std::string& src = source;
    for (const char* f : {"config.json", "generation_config.json"})
      std::filesystem::copy_file(src + "/" + f, dir + "/" + f,
                                 std::filesystem::copy_options::overwrite_existing);
    Checkpoint ckpt(src);
    SafetensorsWriter writer;
    for (const auto& name : ckpt.names()) {
      const TensorMeta m = ckpt.meta(name);
      std::vector<float> data = ckpt.read_all_f32(name);
      if (name.find("mlp.gate.weight") != std::string::npos) std::fill(data.begin(), data.end(), 0.0f);
      writer.add(name, DType::kF32, m.shape, data.data(), data.size() * sizeof(float));
    }
    writer.write(dir + "/model.safetensors");
  }
  int len = static_cast<int>(dir.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  dir.resize(len);
  MPI_Bcast(dir.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  return dir;
}

}  // namespace tpserve::testing_util
