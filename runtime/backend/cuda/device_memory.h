// Device memory of the CUDA backend: every cudaMalloc / cudaMallocHost tpserve makes goes through the
// counted helpers here, so tests can prove that steps allocate nothing; DeviceArena is the one big device
// allocation made at start-up, handed out by a bump pointer (weights, KV cache, workspace).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tpserve {

// n rounded up to a multiple of a.
inline size_t align_up(size_t n, size_t a) {
  return (n + a - 1) / a * a;
}

struct CudaAllocationStats {
  uint64_t count = 0;  // cudaMalloc + cudaMallocHost calls made by tpserve in this process
  uint64_t bytes = 0;
};
CudaAllocationStats cuda_allocation_stats();

void* cuda_malloc_counted(size_t bytes);       // device memory
void* cuda_malloc_host_counted(size_t bytes);  // pinned host memory

class DeviceArena {
 public:
  static constexpr size_t kAlignment = 256;

  explicit DeviceArena(size_t capacity);
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // `bytes` (at least 1) aligned to kAlignment; throws tpserve::Error naming `what` when the arena is full.
  void* allocate(size_t bytes, const char* what);
  size_t capacity() const { return capacity_; }
  size_t used() const { return used_; }
  size_t available() const { return capacity_ - used_; }

 private:
  char* base_ = nullptr;
  size_t capacity_ = 0;
  size_t used_ = 0;
};

// Per-op scratch: a fixed region of the arena handed out from its start again by every op (ops run in
// stream order, and enrolled kernels touch memory only after pdl_wait, so consecutive ops never overlap).
class ScratchRegion {
 public:
  ScratchRegion(void* base, size_t bytes) : base_(static_cast<char*>(base)), bytes_(bytes) {}
  size_t bytes() const { return bytes_; }

  class Cursor {
   public:
    explicit Cursor(const ScratchRegion& region) : region_(region) {}
    // `count` elements of T, 256-byte aligned; throws naming `what` when the region is too small.
    template <typename T>
    T* take(size_t count, const char* what) {
      return static_cast<T*>(take_bytes(count * sizeof(T), what));
    }
    void* take_bytes(size_t bytes, const char* what);

   private:
    const ScratchRegion& region_;
    size_t used_ = 0;
  };

 private:
  char* base_;
  size_t bytes_;
};

}  // namespace tpserve
