// Engines on the GPU for engine-level CUDA tests: a config (YAML, then `overrides` as --set would give them)
// with the backend's PDL policy and kernel switches taken from it, and a fixed arena (room for other tests'
// engines under ctest -j). small_gpu_engine: the small synthetic preset with an MTP head (vocab 4096),
// max_batch 4, max_seq_len 256, blocks of 16, graphs of 1, 2 and 4 sequences, a 2 GiB arena.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/config/config_parser.h"
#include "runtime/engine/engine.h"

namespace tpserve::cuda_test {

inline std::unique_ptr<Engine> gpu_test_engine(parallel::Communicator& comm, const std::string& yaml,
                                               const std::vector<std::string>& overrides, size_t arena_bytes,
                                               const EngineOptions& options = {}) {
  const Config config = parse_config(yaml, "gpu_test_engine", overrides);
  CudaBackendOptions o;
  o.pdl = config.launch.pdl;
  o.kernels = config.runtime.kernels;
  o.arena_bytes = arena_bytes;
  return std::make_unique<Engine>(config, comm, make_cuda_backend(o), options);
}

inline std::unique_ptr<Engine> small_gpu_engine(parallel::Communicator& comm,
                                                const std::vector<std::string>& overrides, bool keep_logits) {
  return gpu_test_engine(comm,
                         "model: {synthetic: {preset: small, seed: 4, vocab: 4096, mtp: true}}\n"
                         "runtime: {backend: cuda, max_batch: 4, max_seq_len: 256, kv_block_size: 16}\n"
                         "cuda_graph: {capture_sizes: [1, 2, 4]}\n",
                         overrides, size_t(2) << 30, EngineOptions{.keep_logits = keep_logits});
}

}  // namespace tpserve::cuda_test
