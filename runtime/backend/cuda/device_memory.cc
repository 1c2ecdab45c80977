#include "runtime/backend/cuda/device_memory.h"

#include <cuda_runtime_api.h>

#include <atomic>

#include "common/cuda_check.h"
#include "common/log.h"

namespace tpserve {
namespace {
std::atomic<uint64_t> g_count{0};
std::atomic<uint64_t> g_bytes{0};

}  // namespace

CudaAllocationStats cuda_allocation_stats() {
  return {g_count.load(), g_bytes.load()};
}

void* cuda_malloc_counted(size_t bytes) {
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, bytes));
  g_count.fetch_add(1);
  g_bytes.fetch_add(bytes);
  return p;
}

void* cuda_malloc_host_counted(size_t bytes) {
  void* p = nullptr;
  CUDA_CHECK(cudaMallocHost(&p, bytes));
  g_count.fetch_add(1);
  g_bytes.fetch_add(bytes);
  return p;
}

DeviceArena::DeviceArena(size_t capacity) : capacity_(capacity) {
  base_ = static_cast<char*>(cuda_malloc_counted(capacity));
}

DeviceArena::~DeviceArena() {
  const cudaError_t rc = cudaFree(base_);
  if (rc != cudaSuccess) log_error("cudaFree of the device arena: ", cuda_error_text(rc));
}

void* DeviceArena::allocate(size_t bytes, const char* what) {
  const size_t size = align_up(bytes == 0 ? 1 : bytes, kAlignment);
  TPS_CHECK(size <= capacity_ - used_, "device arena full: ", what, " needs ", size, " bytes, ",
            capacity_ - used_, " of ", capacity_,
            " left (raise runtime.gpu_memory_fraction or the arena size)");
  void* p = base_ + used_;
  used_ += size;
  return p;
}

void* ScratchRegion::Cursor::take_bytes(size_t bytes, const char* what) {
  const size_t size = align_up(bytes == 0 ? 1 : bytes, DeviceArena::kAlignment);
  TPS_CHECK(size <= region_.bytes_ - used_, "CUDA workspace too small: ", what, " needs ", size,
            " more bytes of ", region_.bytes_, " (CudaBackendOptions::workspace_bytes)");
  void* p = region_.base_ + used_;
  used_ += size;
  return p;
}

}  // namespace tpserve
