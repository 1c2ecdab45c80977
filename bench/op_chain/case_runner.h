// One op_chain case (shape, tokens): warm-up and output check of every mode eagerly, one captured graph per
// mode (CudaBackend::capture, whose report counts the programmatic edges), then rounds in A/B/B/A order,
// each timing `replays` graph replays and `replays` eager chains per mode.
//
// Timing: a spin kernel holds the GPU while the host queues the timed work, and two CUDA events around it
// give the mean per replay (or per eager chain). Graph replays are GPU time (one launch queues a whole
// chain); eager chains are kernel launches from the host, which can bound them once the launch queue is
// full, as in eager decode.
#pragma once

#include "bench/op_chain/chain_buffers.h"
#include "bench/op_chain/chain_summary.h"

namespace tpserve::bench {

CaseRun run_case(CudaBackend& backend, ChainBuffers& buffers, int tokens, const ChainOptions& options);

}  // namespace tpserve::bench
