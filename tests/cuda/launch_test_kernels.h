// Two trivial kernels for the launcher tests: one enrolled in PDL, one launched as Pdl::kNever.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/launch.h"

namespace tpserve::launch_test {

// *out = value, through launch() at site `site`, enrolled (pdl_wait before the write).
void launch_enrolled(const kernels::LaunchPolicy& policy, kernels::Site site, cudaStream_t stream, int* out,
                     int value);
// *out = value, through launch() as a kernel that cannot be enrolled.
void launch_unenrolled(const kernels::LaunchPolicy& policy, kernels::Site site, cudaStream_t stream, int* out,
                       int value);
const void* enrolled_kernel();
const void* unenrolled_kernel();

}  // namespace tpserve::launch_test
