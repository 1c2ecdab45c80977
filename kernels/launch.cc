// LaunchPolicy: per-device and per-(device, kernel) facts, cached decisions and the PDL report.
#include "kernels/launch.h"

#include <algorithm>
#include <sstream>

#include "common/log.h"

namespace tpserve::kernels {
namespace {
int current_device() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  return device;
}
}  // namespace

int LaunchPolicy::device_sm_locked(int device) const {
  auto it = device_sm_.find(device);
  if (it != device_sm_.end()) return it->second;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const int sm = prop.major * 10 + prop.minor;
  device_sm_.emplace(device, sm);
  return sm;
}

LaunchPolicy::KernelInfo& LaunchPolicy::kernel_info_locked(int device, const void* kernel) const {
  auto key = std::make_pair(device, kernel);
  auto it = kernels_.find(key);
  if (it != kernels_.end()) return it->second;
  cudaFuncAttributes attr{};
  CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  ++attribute_queries_;
  if (prefer_max_shared_)
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
  KernelInfo info;
  // ptxVersion is the architecture the source was compiled for (what __CUDA_ARCH__ saw, so whether the
  // griddepcontrol instructions exist); binaryVersion may be higher when the driver JIT-compiled the PTX.
  info.sm = attr.ptxVersion;
  // What dynamic shared memory a launch may ask for now: 48 KB less the kernel's static shared memory.
  info.smem_limit = static_cast<size_t>(attr.maxDynamicSharedSizeBytes);
  const char* name = nullptr;
  if (cudaFuncGetName(&name, kernel) == cudaSuccess && name != nullptr)
    info.name = name;
  else
    info.name = "?";
  return kernels_.emplace(key, std::move(info)).first->second;
}

LaunchPolicy::Decision& LaunchPolicy::decision_locked(int device, Site site, const void* kernel,
                                                      Pdl pdl) const {
  const bool enrolled = pdl == Pdl::kEnrolled;
  auto key = std::make_tuple(device, static_cast<int>(site), kernel, enrolled);
  auto it = decisions_.find(key);
  if (it != decisions_.end()) return it->second;
  const int device_sm = device_sm_locked(device);
  const KernelInfo& info = kernel_info_locked(device, kernel);
  Decision d;
  d.enrolled = enrolled;
  d.decision = decide_pdl(site, settings_, device_sm, info.sm, enrolled);
  if (d.decision.warn)
    log_warn("PDL at site ", site_name(site), " for ", info.name, " on device ", device, ": ",
             d.decision.reason);
  else
    log_debug("PDL at site ", site_name(site), " for ", info.name, " on device ", device, ": ",
              d.decision.enabled ? "on" : "off", " (", d.decision.reason, ")");
  return decisions_.emplace(key, std::move(d)).first->second;
}

PdlDecision LaunchPolicy::decide(Site site, const void* kernel, Pdl pdl) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return decision_locked(current_device(), site, kernel, pdl).decision;
}

bool LaunchPolicy::record_launch(Site site, const void* kernel, Pdl pdl, size_t smem) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const int device = current_device();
  Decision& d = decision_locked(device, site, kernel, pdl);
  if (smem > 0) {
    KernelInfo& info = kernel_info_locked(device, kernel);
    if (smem > info.smem_limit) {
      CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
      info.smem_limit = smem;
    }
  }
  ++d.launches;
  ++launches_;
  return d.decision.enabled;
}

std::vector<PdlReportRow> LaunchPolicy::report() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<PdlReportRow> rows;
  for (const auto& [key, d] : decisions_) {
    const auto& [device, site, kernel, enrolled] = key;
    PdlReportRow row;
    row.device = device;
    row.site = static_cast<Site>(site);
    const auto it = kernels_.find(std::make_pair(device, kernel));
    if (it != kernels_.end()) row.kernel = it->second.name, row.kernel_sm = it->second.sm;
    const auto dev = device_sm_.find(device);
    if (dev != device_sm_.end()) row.device_sm = dev->second;
    row.enrolled = enrolled;
    row.decision = d.decision;
    row.launches = d.launches;
    rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(), [](const PdlReportRow& a, const PdlReportRow& b) {
    return std::tie(a.device, a.site, a.kernel) < std::tie(b.device, b.site, b.kernel);
  });
  return rows;
}

int LaunchPolicy::kernel_attribute_queries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return attribute_queries_;
}

uint64_t LaunchPolicy::launches() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return launches_;
}

SmLimits current_sm_limits() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  SmLimits sm;
  sm.regs = prop.regsPerMultiprocessor;
  sm.smem = prop.sharedMemPerMultiprocessor;
  sm.reserved_smem_per_block = prop.reservedSharedMemPerBlock;
  sm.threads = prop.maxThreadsPerMultiProcessor;
  sm.blocks = prop.maxBlocksPerMultiProcessor;
  return sm;
}

int resident_blocks_per_sm(const void* kernel, int threads, size_t dynamic_smem) {
  cudaFuncAttributes attr{};
  CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  return resident_blocks(current_sm_limits(), attr.numRegs, attr.sharedSizeBytes, threads, dynamic_smem);
}

bool runs_sm90_code(const void* kernel, int device_sm) {
  cudaFuncAttributes attr{};
  CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  return device_sm >= 90 && attr.ptxVersion >= 90;
}

std::string format_pdl_report(const std::vector<PdlReportRow>& rows) {
  std::ostringstream os;
  os << "device  site                 pdl  launches  kernel (sm)  reason\n";
  for (const auto& r : rows) {
    std::string site = site_name(r.site);
    site.resize(std::max<size_t>(site.size(), 20), ' ');
    os << "cuda:" << r.device << "  " << site << " " << (r.decision.enabled ? "on " : "off") << "  "
       << r.launches << "  " << r.kernel << " (sm_" << r.kernel_sm << (r.enrolled ? "" : ", not enrolled")
       << ")  " << r.decision.reason << "\n";
  }
  return os.str();
}

}  // namespace tpserve::kernels
