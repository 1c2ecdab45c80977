// Packs a StepBatch into one byte buffer (and back), so that the control plane can broadcast each step's
// plan from rank 0 to every rank in one message.
#pragma once

#include <vector>

#include "runtime/model/step_batch.h"

namespace tpserve {

std::vector<char> encode_step(const StepBatch& batch);
StepBatch decode_step(const std::vector<char>& bytes);  // throws tpserve::Error on a malformed buffer

}  // namespace tpserve
