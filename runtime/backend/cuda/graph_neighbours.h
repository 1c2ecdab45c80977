// The neighbours table of a captured step graph (GraphReport::neighbours).
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "runtime/backend/backend.h"

namespace tpserve {

// Every edge from[i] -> to[i] between two kernel nodes whose launches the runtime API can read (other
// libraries' kernels, cuBLASLt's, are left out), grouped by the two launches, most frequent first, with what
// kernels/residency.h says fits of the second beside the first on the current device.
std::vector<KernelNeighbours> kernel_neighbours(const std::vector<cudaGraphNode_t>& from,
                                                const std::vector<cudaGraphNode_t>& to);

}  // namespace tpserve
