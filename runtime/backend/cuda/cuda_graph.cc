// CUDA graphs for CudaBackend: capture a step's ops on the backend stream, instantiate once, replay with one
// launch. The report walks the captured graph: nodes, kernel nodes, edges with their type (cudaGraphGetEdges
// with edge data: without it the call fails with cudaErrorLossyQuery when programmatic edges exist), per
// launch site the kernel nodes and the programmatic edges into them (kernel -> site from the launch policy),
// and the kernel -> kernel edges' neighbours table (graph_neighbours.h).
#include <chrono>
#include <map>

#include "common/log.h"
#include "kernels/launch.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/graph_neighbours.h"

namespace tpserve {
namespace {

// Owns the captured graph from the end of its capture, and its executable once instantiated, so that a
// failure after the capture (instantiation, upload, the report) frees both.
class CudaStepGraph final : public StepGraph {
 public:
  CudaStepGraph(cudaGraph_t graph, cudaStream_t stream) : graph_(graph), stream_(stream) {}
  ~CudaStepGraph() override {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
  }
  void instantiate() {
    CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
    CUDA_CHECK(cudaGraphUpload(exec_, stream_));
  }
  void set_report(GraphReport report) { report_ = std::move(report); }
  void replay() override { CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }
  const GraphReport& report() const override { return report_; }

 private:
  cudaGraph_t graph_;
  cudaGraphExec_t exec_ = nullptr;
  cudaStream_t stream_;
  GraphReport report_;
};

GraphReport analyze(cudaGraph_t graph, const kernels::LaunchPolicy& policy) {
  GraphReport r;
  std::map<std::string, std::string> site_of_kernel;  // mangled kernel name -> site
  std::map<std::string, bool> pdl_of_kernel;          // mangled kernel name -> launched with PDL
  for (const auto& row : policy.report()) {
    site_of_kernel.emplace(row.kernel, kernels::site_name(row.site));
    pdl_of_kernel[row.kernel] = pdl_of_kernel[row.kernel] || row.decision.enabled;
  }
  size_t n = 0;
  CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0) CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
  r.nodes = static_cast<int>(n);
  std::map<cudaGraphNode_t, std::string> site_of_node;
  std::map<cudaGraphNode_t, bool> pdl_node;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeKernel) continue;
    ++r.kernel_nodes;
    cudaKernelNodeParams params{};
    const char* name = nullptr;
    // Kernels the runtime API cannot name (other libraries' modules: cuBLASLt, NCCL) are "library"; kernels
    // it can name that never went through kernels/launch.h (a benchmark's own launches) are "other".
    std::string site = "library";
    if (cudaGraphKernelNodeGetParams(node, &params) != cudaSuccess) {
      cudaGetLastError();
    } else if (cudaFuncGetName(&name, params.func) == cudaSuccess && name != nullptr) {
      auto it = site_of_kernel.find(name);
      site = it != site_of_kernel.end() ? it->second : "other";
      pdl_node[node] = pdl_of_kernel[name];
    } else {
      cudaGetLastError();
    }
    site_of_node[node] = site;
    ++r.kernels_per_site[site];
  }
  size_t e = 0;
  CUDA_CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &e));
  std::vector<cudaGraphNode_t> from(e), to(e);
  std::vector<cudaGraphEdgeData> data(e);
  if (e > 0) CUDA_CHECK(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &e));
  r.edges = static_cast<int>(e);
  for (size_t i = 0; i < e; ++i)
    if (pdl_node[to[i]] && site_of_node.count(from[i]) > 0) ++r.pdl_kernel_nodes_after_kernel;
  for (size_t i = 0; i < e; ++i) {
    if (data[i].type != cudaGraphDependencyTypeProgrammatic) continue;
    ++r.programmatic_edges;
    auto it = site_of_node.find(to[i]);
    ++r.programmatic_edges_per_site[it == site_of_node.end() ? "?" : it->second];
  }
  r.neighbours = kernel_neighbours(from, to);
  return r;
}

}  // namespace

std::unique_ptr<StepGraph> CudaBackend::capture(const std::function<void()>& body) {
  const auto start = std::chrono::steady_clock::now();
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  size_t free_before = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
  CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  try {
    body();
  } catch (...) {
    cudaGraph_t broken = nullptr;
    cudaStreamEndCapture(stream_, &broken);
    if (broken != nullptr) cudaGraphDestroy(broken);
    cudaGetLastError();
    throw;
  }
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  auto step = std::make_unique<CudaStepGraph>(graph, stream_);
  step->instantiate();
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  size_t free_after = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
  GraphReport report = analyze(graph, *policy_);
  report.capture_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  report.memory_bytes = free_before > free_after ? free_before - free_after : 0;
  step->set_report(std::move(report));
  return step;
}

std::string CudaBackend::launch_report() const {
  return kernels::format_pdl_report(policy_->report());
}

}  // namespace tpserve
