// RuntimeSetup: what a tpserve process needs around the engine: the world communicator (MPI when the job
// has several ranks) and the backend the config asks for (auto: CUDA when built in and a GPU is present).
#pragma once

#include <memory>

#include "parallel/communicator.h"
#include "parallel/topology.h"
#include "runtime/backend/backend.h"
#include "runtime/config/config.h"

namespace tpserve {

class RuntimeSetup {
 public:
  explicit RuntimeSetup(const Config& config);
  parallel::Communicator& world() { return *world_; }
  const parallel::Topology& topology() const { return topology_; }
  std::unique_ptr<Backend> make_backend();

 private:
  Config config_;
  parallel::Topology topology_;
  std::unique_ptr<parallel::Communicator> world_;
};

}  // namespace tpserve
