// Helper kernels of the op benchmark: a read-only reduction (measures HBM read bandwidth), a fill with
// pseudo-random bf16 values, and a spin kernel that keeps the GPU busy while the host queues timed work.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/launch.h"

namespace tpserve::bench {

// partial[b] = sum of block b's share of `bytes` bytes of bf16 (bytes a multiple of 16).
void launch_read_reduce(const kernels::LaunchPolicy& policy, cudaStream_t stream, const void* data,
                        size_t bytes, float* partial, int blocks);
// The median read bandwidth in GB/s of `reps` timed launch_read_reduce over `bytes` at `data`, after one
// untimed; `partial` holds `blocks` floats. Waits for the stream (outside any capture).
double time_read_bandwidth_gbps(const kernels::LaunchPolicy& policy, cudaStream_t stream, const void* data,
                                size_t bytes, float* partial, int blocks, int reps);
// bf16 values in [-1, 1) from a hash of (seed, index); bytes a multiple of 2.
void launch_fill_bf16(const kernels::LaunchPolicy& policy, cudaStream_t stream, void* data, size_t bytes,
                      uint64_t seed);
// Busy-waits about `cycles` clock cycles on one thread.
void launch_spin(const kernels::LaunchPolicy& policy, cudaStream_t stream, long long cycles);

}  // namespace tpserve::bench
