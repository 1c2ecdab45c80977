// launch(): the only way tpserve launches a kernel.
//
// Every launch names its site (kernels/policy.h) and says whether the kernel is enrolled in PDL as a whole
// (pdl_wait() before its first read of predecessor output, no __restrict__/__ldg on such data). It goes
// through cudaLaunchKernelEx and carries cudaLaunchAttributeProgrammaticStreamSerialization exactly when
// the LaunchPolicy decides so for that site, that kernel and the current device; a kernel passed as
// Pdl::kNever never gets the attribute. The result is checked (CUDA_CHECK + cudaGetLastError).
//
// LaunchPolicy caches per device (its SM from cudaGetDeviceProperties) and per (device, kernel) (the SM the
// kernel was compiled for, from cudaFuncGetAttributes), never in a function-local static, so a process that
// drives several devices gets each one right. It also keeps every decision with its reason and a launch
// count, for reports (`--report-pdl`) and tests.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/cuda_check.h"
#include "kernels/policy.h"
#include "kernels/residency.h"

namespace tpserve::kernels {

// Whether a kernel is enrolled in PDL. kNever: it cannot be enrolled safely and never gets the attribute.
enum class Pdl : bool { kNever = false, kEnrolled = true };

// One (device, site, kernel) that launch() has seen, with its decision.
struct PdlReportRow {
  int device = 0;
  Site site = Site::kEmbedding;
  std::string kernel;  // mangled name from cudaFuncGetName
  int device_sm = 0;
  int kernel_sm = 0;
  bool enrolled = true;
  PdlDecision decision;
  uint64_t launches = 0;
};

class LaunchPolicy {
 public:
  // prefer_max_shared: every kernel launched through the policy asks for the largest shared-memory carveout
  // (cudaFuncAttributePreferredSharedMemoryCarveout), set once per (device, kernel). An SM's split between L1
  // and shared memory changes only when it is idle, so a kernel that starts early under PDL with a large
  // shared-memory block (the staged GEMV, gemv.h) finds room on SMs still running a small-shared predecessor
  // only if that predecessor's SMs already have the large carveout.
  explicit LaunchPolicy(PdlSettings settings = {}, bool prefer_max_shared = false)
      : settings_(std::move(settings)), prefer_max_shared_(prefer_max_shared) {}
  LaunchPolicy(const LaunchPolicy&) = delete;
  LaunchPolicy& operator=(const LaunchPolicy&) = delete;

  const PdlSettings& settings() const { return settings_; }

  // The decision for `site` and `kernel` on the current device; computed once per (device, site, kernel)
  // and logged when it is the costly `on` below SM90.
  PdlDecision decide(Site site, const void* kernel, Pdl pdl) const;
  // decide() + counts one launch, and raises the kernel's dynamic shared-memory limit on the current device
  // to `smem` where it is lower (needed where its static plus dynamic shared memory exceed 48 KiB); what
  // launch() calls, under one lock.
  bool record_launch(Site site, const void* kernel, Pdl pdl, size_t smem) const;

  // Every decision taken so far, ordered by device, site and kernel name.
  std::vector<PdlReportRow> report() const;
  // cudaFuncGetAttributes calls made so far (one per (device, kernel) when the cache works).
  int kernel_attribute_queries() const;
  // Launches made through the policy so far, on every device (an empty grid launches nothing and is not
  // counted): a caller can tell whether anything was launched between two points.
  uint64_t launches() const;

 private:
  struct KernelInfo {
    int sm = 0;
    std::string name;
    size_t smem_limit = 0;  // the kernel's current dynamic shared memory limit (cudaFuncGetAttributes)
  };
  struct Decision {
    PdlDecision decision;
    bool enrolled = true;
    uint64_t launches = 0;
  };
  // Callers hold mutex_.
  int device_sm_locked(int device) const;
  KernelInfo& kernel_info_locked(int device, const void* kernel) const;
  Decision& decision_locked(int device, Site site, const void* kernel, Pdl pdl) const;

  PdlSettings settings_;
  bool prefer_max_shared_ = false;
  mutable std::mutex mutex_;
  mutable std::map<int, int> device_sm_;
  mutable std::map<std::pair<int, const void*>, KernelInfo> kernels_;
  mutable std::map<std::tuple<int, int, const void*, bool>, Decision> decisions_;
  mutable int attribute_queries_ = 0;
  mutable uint64_t launches_ = 0;
};

// The current device's SmLimits (cudaGetDeviceProperties).
SmLimits current_sm_limits();
// resident_blocks for `kernel` on the current device (cudaFuncGetAttributes, current_sm_limits).
int resident_blocks_per_sm(const void* kernel, int threads, size_t dynamic_smem);

// Whether a device of compute capability `device_sm` (e.g. 90) runs `kernel`'s SM90 code: the device is
// SM90+ and the kernel was compiled for SM90+ (cudaFuncAttributes::ptxVersion: what __CUDA_ARCH__ saw), as
// kernels using SM90-only instructions (clusters, bulk copies) need.
bool runs_sm90_code(const void* kernel, int device_sm);

// A table of the report, one line per row, for logs and `--report-pdl`.
std::string format_pdl_report(const std::vector<PdlReportRow>& rows);

namespace detail {
// cluster_x > 0: thread-block clusters of that many blocks along x (cudaLaunchAttributeClusterDimension).
template <typename... Params, typename... Args>
void launch_with(const LaunchPolicy& policy, Site site, Pdl pdl, unsigned cluster_x,
                 void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                 Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "launch(): argument count does not match the kernel");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
  const void* fn = reinterpret_cast<const void*>(kernel);
  cudaLaunchAttribute attributes[2] = {};
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = 0;
  if (policy.record_launch(site, fn, pdl, smem)) {
    attributes[config.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[config.numAttrs].val.programmaticStreamSerializationAllowed = 1;
    ++config.numAttrs;
  }
  if (cluster_x > 0) {
    attributes[config.numAttrs].id = cudaLaunchAttributeClusterDimension;
    attributes[config.numAttrs].val.clusterDim.x = cluster_x;
    attributes[config.numAttrs].val.clusterDim.y = 1;
    attributes[config.numAttrs].val.clusterDim.z = 1;
    ++config.numAttrs;
  }
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
  CUDA_CHECK(cudaGetLastError());
}
}  // namespace detail

// Launches kernel<<<grid, block, smem, stream>>>(args...) under the policy. An empty grid launches nothing.
template <typename... Params, typename... Args>
void launch(const LaunchPolicy& policy, Site site, Pdl pdl, void (*kernel)(Params...), dim3 grid, dim3 block,
            size_t smem, cudaStream_t stream, Args&&... args) {
  detail::launch_with(policy, site, pdl, 0, kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

// launch() in thread-block clusters of cluster_x blocks along x (SM90+; grid.x a multiple of cluster_x): the
// blocks of a cluster are resident together and can read each other's shared memory and wait for each other
// (cooperative_groups::this_cluster()).
template <typename... Params, typename... Args>
void launch_clusters(const LaunchPolicy& policy, Site site, Pdl pdl, unsigned cluster_x,
                     void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                     Args&&... args) {
  detail::launch_with(policy, site, pdl, cluster_x, kernel, grid, block, smem, stream,
                      std::forward<Args>(args)...);
}

}  // namespace tpserve::kernels
