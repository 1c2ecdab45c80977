// Small integer kernels of speculative decoding: tokens that stay on the device (drafts, emitted tokens)
// are resolved into step inputs, drafts are stored by sequence slot, and MTP draft steps get their
// positions and KV slots from the block tables (backend.h: resolve_tokens, add_i32, scatter_i32,
// draft_step_meta). Each is one thread per element.
#pragma once

#include "kernels/kernel_api.h"

namespace tpserve::kernels {

struct ResolveTokensParams {
  int32_t* ids = nullptr;          // [n] in place: ids[i] < 0 becomes table[-ids[i] - 1]
  const int32_t* table = nullptr;  // [table_size]
  int n = 0;
  int table_size = 0;  // out-of-range references become -1 (an empty embedding row)
};
void launch_resolve_tokens(const ResolveTokensParams& p, cudaStream_t stream, const LaunchPolicy& policy);

struct AddI32Params {
  const int32_t* a = nullptr;  // [n]
  const int32_t* b = nullptr;  // [n]
  int32_t c = 0;
  int32_t* out = nullptr;  // [n] a + b + c
  int n = 0;
};
void launch_add_i32(const AddI32Params& p, cudaStream_t stream, const LaunchPolicy& policy);

struct ScatterI32Params {
  const int32_t* values = nullptr;  // [n]
  const int32_t* index = nullptr;   // [n] into table (checked on the host side by construction)
  int32_t* table = nullptr;         // [table_size]
  int n = 0;
  int table_size = 0;
};
void launch_scatter_i32(const ScatterI32Params& p, cudaStream_t stream, const LaunchPolicy& policy);

struct DraftStepMetaParams {
  const int32_t* positions = nullptr;     // [n]
  const int32_t* block_tables = nullptr;  // [n, width]
  int width = 0;
  int block_size = 0;
  int32_t* slot_mapping = nullptr;  // [n] out
  int32_t* context_lens = nullptr;  // [n] out: position + 1
  int n = 0;
};
void launch_draft_step_meta(const DraftStepMetaParams& p, cudaStream_t stream, const LaunchPolicy& policy);

}  // namespace tpserve::kernels
