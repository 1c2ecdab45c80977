// RuntimeSetup: what a tpserve process needs around the engine: the world communicator (MPI when the job
// has several ranks) and the backend the config asks for (auto: CUDA when built in and a GPU is present).
#pragma once

#include <functional>
#include <memory>

#include "parallel/communicator.h"
#include "parallel/topology.h"
#include "runtime/backend/backend.h"
#include "runtime/config/config.h"
#include "runtime/engine/engine.h"

namespace tpserve {

class RuntimeSetup {
 public:
  explicit RuntimeSetup(const Config& config);
  parallel::Communicator& world() { return *world_; }
  // The backend the config asks for and an engine on it: the plan travels over MPI; collectives go over
  // NCCL on GPUs (one GPU per process, picked by the local rank; small sums over the one-shot all-reduce
  // per parallel.all_reduce) and over MPI on the CPU.
  // `wrap_data` (benchmarks) wraps the data communicator the engine gets.
  using DataWrapper = std::function<std::unique_ptr<parallel::Communicator>(parallel::Communicator&)>;
  std::unique_ptr<Engine> make_engine(const EngineOptions& options = {},
                                      const DataWrapper& wrap_data = nullptr);
  const parallel::Topology& topology() const { return topology_; }

 private:
  std::unique_ptr<Backend> make_backend();
  // runtime.backend, with auto resolved alike on every rank: CUDA where each rank has a GPU of its own.
  BackendKind resolve_backend_kind();

  Config config_;
  parallel::Topology topology_;
  std::unique_ptr<parallel::Communicator> world_;
  std::unique_ptr<parallel::Communicator> data_;  // NCCL on GPUs (when the world has several ranks)
  std::unique_ptr<parallel::Communicator>
      wrapped_data_;  // make_engine's wrap_data around the data communicator
};

}  // namespace tpserve
