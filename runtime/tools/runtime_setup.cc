#include "runtime/tools/runtime_setup.h"

#include <mpi.h>

#include <string>

#include "common/log.h"
#include "common/mpi_check.h"
#include "parallel/mpi_communicator.h"
#if TPSERVE_HAVE_CUDA
#include "parallel/nccl_communicator.h"
#include "runtime/backend/cuda/cuda_backend.h"
#endif

namespace tpserve {
namespace {

#if TPSERVE_HAVE_CUDA
// The one-shot all-reduce the GPU data plane takes, or nullptr for NCCL. Collective: every rank gets the same
// answer (one rank left out of the one-shot's setup would wait there forever). `one_shot` throws where it
// cannot be set up; `auto` falls back to NCCL, saying why.
std::unique_ptr<parallel::OneShotAllReduce> one_shot_for(AllReduceImpl impl, int device,
                                                         const kernels::LaunchPolicy& policy) {
  if (impl == AllReduceImpl::kNccl) return nullptr;
  if (impl == AllReduceImpl::kOneShot)
    return parallel::make_one_shot_all_reduce(MPI_COMM_WORLD, device, policy);
  std::string why;
  auto one_shot = parallel::make_one_shot_all_reduce_if_supported(MPI_COMM_WORLD, device, policy, &why);
  if (one_shot != nullptr)
    log_info("parallel.all_reduce auto: one_shot (every rank on one host, peer access between their GPUs)");
  else
    log_info("parallel.all_reduce auto: nccl (one_shot ", why, ")");
  return one_shot;
}
#endif

}  // namespace

RuntimeSetup::RuntimeSetup(const Config& config) : config_(config) {
  int world_size = 0;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
  validate_world_size(config, world_size);
  topology_ = parallel::discover_topology(config.parallel.tp, config.parallel.ep);
  log_info("topology: ", topology_.describe());
  world_ = topology_.world_size > 1 ? parallel::make_mpi_communicator(MPI_COMM_WORLD)
                                    : parallel::make_single_rank_communicator();
}

BackendKind RuntimeSetup::resolve_backend_kind() {
  const BackendKind kind = config_.runtime.backend;
  if (kind != BackendKind::kAuto) return kind;
  // CUDA where every rank has a GPU of its own on its host; the ranks agree, so that one job never mixes
  // backends (their data planes differ). A host with GPUs, but fewer than its processes, runs the CPU
  // reference backend with a warning (runtime.backend: cuda makes it an error).
  std::string why = "this build has no CUDA";
  int32_t without_gpu = 1;
#if TPSERVE_HAVE_CUDA
  why.clear();
  const int devices = cuda_device_count(&why);
  if (devices > 0 && topology_.local_size > devices) {
    why = std::to_string(topology_.local_size) + " processes on this host but " + std::to_string(devices) +
          " visible GPUs";
    log_warn("runtime.backend auto: ", why, ": not one GPU a process, so the CPU reference backend ",
             "(runtime.backend: cuda to stop instead; each process must see every GPU of its host)");
  } else if (devices > 0) {
    without_gpu = 0;
  }
#endif
  world_->all_reduce_sum(&without_gpu, 1, DType::kI32);
  if (without_gpu == 0) {
    log_info("runtime.backend auto: cuda (every rank has a GPU)");
    return BackendKind::kCuda;
  }
  log_info("runtime.backend auto: the CPU reference backend (", without_gpu, " of ", world_->size(),
           " ranks without a GPU; here: ", why.empty() ? "a GPU is present" : why, ")");
  return BackendKind::kCpu;
}

std::unique_ptr<Backend> RuntimeSetup::make_backend() {
  if (resolve_backend_kind() == BackendKind::kCuda) {
#if TPSERVE_HAVE_CUDA
    // One GPU per process, picked by the rank among the processes of this host.
    std::string why;
    const int devices = cuda_device_count(&why);
    TPS_CHECK(devices > 0, "runtime.backend: cuda, but no CUDA device is visible (", why, ")");
    CudaBackendOptions options;
    TPS_CHECK(topology_.local_size <= devices, "runtime.backend: cuda with ", topology_.local_size,
              " processes on this host but ", devices, " visible GPUs (one process per GPU)");
    options.device = topology_.local_rank;
    options.pdl = config_.launch.pdl;
    options.pdl.kill_switch = kernels::pdl_kill_switch_from_env();
    options.gpu_memory_fraction = config_.runtime.gpu_memory_fraction;
    options.kernels = config_.runtime.kernels;
    return make_cuda_backend(options);
#else
    TPS_THROW("runtime.backend: cuda, but this build has no CUDA (configure with -DTPSERVE_CUDA=ON)");
#endif
  }
  return make_cpu_backend();
}

std::unique_ptr<Engine> RuntimeSetup::make_engine(const EngineOptions& options,
                                                  const DataWrapper& wrap_data) {
  std::unique_ptr<Backend> backend = make_backend();
  parallel::Communicator* data = world_.get();
#if TPSERVE_HAVE_CUDA
  if (auto* cuda = dynamic_cast<CudaBackend*>(backend.get()); cuda != nullptr && world_->size() > 1) {
    auto nccl = parallel::make_nccl_communicator(MPI_COMM_WORLD, cuda->device_index(), cuda->stream());
    // A wait on a collective whose peer failed ends with NCCL's error instead of hanging.
    cuda->set_wait_hook([comm = nccl.get()] { comm->check_health(); });
    if (auto one_shot =
            one_shot_for(config_.parallel.all_reduce, cuda->device_index(), cuda->launch_policy()))
      nccl->use_one_shot_all_reduce(std::move(one_shot));
    data_ = std::move(nccl);
    data = data_.get();
  }
#endif
  if (config_.parallel.all_reduce == AllReduceImpl::kOneShot && data == world_.get())
    log_warn("parallel.all_reduce: one_shot applies to the CUDA backend with several ranks; sums go over ",
             world_->size() > 1 ? "MPI" : "nothing (one rank)");
  if (wrap_data) {
    wrapped_data_ = wrap_data(*data);
    data = wrapped_data_.get();
  }
  return std::make_unique<Engine>(config_, *world_, *data, std::move(backend), options);
}

}  // namespace tpserve
