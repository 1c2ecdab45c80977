// A data communicator for measuring what the all-reduces cost: every collective goes to the real one except
// the sums (all_reduce_sum and the fused all_reduce_add_rmsnorm), which do nothing. The step then runs the
// same kernels on unsummed partials: its time minus the normal step's is the all-reduces' share (tp_decode
// arm key bench.skip_all_reduce=1). The tokens it produces are meaningless.
#pragma once

#include <memory>

#include "parallel/communicator.h"

namespace tpserve::bench {

// `inner` must outlive the result.
std::unique_ptr<parallel::Communicator> make_skip_all_reduce_communicator(parallel::Communicator& inner);

}  // namespace tpserve::bench
