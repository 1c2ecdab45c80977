// What every kernel header needs: the bf16 type, cudaStream_t and the LaunchPolicy its launcher takes.
// Host-includable (no device code), so the backend's .cc files can fill Params structs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tpserve::kernels {

using bf16 = __nv_bfloat16;
class LaunchPolicy;

}  // namespace tpserve::kernels
