#include "runtime/backend/cuda/graph_neighbours.h"

#include <algorithm>
#include <map>
#include <optional>

#include "common/cuda_check.h"
#include "common/kernel_name.h"
#include "kernels/launch.h"
#include "kernels/residency.h"

namespace tpserve {
namespace {

// A kernel node's launch, or nullopt for other nodes and kernels the runtime API cannot read.
std::optional<KernelLaunchShape> launch_shape(cudaGraphNode_t node) {
  cudaGraphNodeType type;
  CUDA_CHECK(cudaGraphNodeGetType(node, &type));
  if (type != cudaGraphNodeTypeKernel) return std::nullopt;
  cudaKernelNodeParams params{};
  cudaFuncAttributes attr{};
  if (cudaGraphKernelNodeGetParams(node, &params) != cudaSuccess ||
      cudaFuncGetAttributes(&attr, params.func) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  const char* name = nullptr;
  if (cudaFuncGetName(&name, params.func) != cudaSuccess) cudaGetLastError();
  KernelLaunchShape k;
  k.kernel = short_kernel_name(name);
  k.blocks = static_cast<int>(params.gridDim.x * params.gridDim.y * params.gridDim.z);
  k.threads = static_cast<int>(params.blockDim.x * params.blockDim.y * params.blockDim.z);
  k.regs = attr.numRegs;
  k.smem = attr.sharedSizeBytes + params.sharedMemBytes;
  return k;
}

kernels::BlockFootprint footprint(const KernelLaunchShape& k) {
  return {k.regs, k.smem, k.threads};
}

// n.first's blocks spread evenly over `sms` SMs, one wave at most, and what fits of n.second beside them.
void place(const kernels::SmLimits& sm, int sms, KernelNeighbours& n) {
  const kernels::BlockFootprint a = footprint(n.first), b = footprint(n.second);
  const kernels::EvenSpread spread = kernels::spread_evenly(
      n.first.blocks, sms, kernels::resident_blocks(sm, a.regs_per_thread, 0, a.threads, a.smem));
  n.sms = sms;
  n.first_most = spread.most, n.first_fewest = spread.fewest, n.sms_with_most = spread.sms_with_most;
  const kernels::BesideFit most = kernels::blocks_beside(sm, a, n.first_most, b);
  const kernels::BesideFit fewest = kernels::blocks_beside(sm, a, n.first_fewest, b);
  n.beside_most = most.blocks, n.bound_most = most.bound;
  n.beside_fewest = fewest.blocks, n.bound_fewest = fewest.bound;
}

}  // namespace

std::vector<KernelNeighbours> kernel_neighbours(const std::vector<cudaGraphNode_t>& from,
                                                const std::vector<cudaGraphNode_t>& to) {
  int device = 0, num_sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device));
  const kernels::SmLimits sm = kernels::current_sm_limits();
  std::map<cudaGraphNode_t, std::optional<KernelLaunchShape>> shapes;
  auto shape_of = [&](cudaGraphNode_t node) -> const std::optional<KernelLaunchShape>& {
    auto it = shapes.find(node);
    if (it == shapes.end()) it = shapes.emplace(node, launch_shape(node)).first;
    return it->second;
  };
  std::map<std::pair<KernelLaunchShape, KernelLaunchShape>, int> counts;
  for (size_t i = 0; i < from.size() && i < to.size(); ++i) {
    const auto& a = shape_of(from[i]);
    const auto& b = shape_of(to[i]);
    if (a && b) ++counts[{*a, *b}];
  }
  std::vector<KernelNeighbours> rows;
  for (const auto& [pair, count] : counts) {
    KernelNeighbours n{pair.first, pair.second, count};
    place(sm, std::max(num_sms, 1), n);
    rows.push_back(std::move(n));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.count > b.count; });
  return rows;
}

}  // namespace tpserve
