// CudaBackend's small integer ops of speculative decoding (kernels/speculative_ops.h).
#include "kernels/speculative_ops.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/tensor_checks.h"

namespace tpserve {

using cuda_ops::expect;
using cuda_ops::to_int;

void CudaBackend::resolve_tokens(Tensor ids, Tensor table) {
  expect(ids, DType::kI32, "resolve_tokens", "ids");
  expect(table, DType::kI32, "resolve_tokens", "table");
  if (ids.numel() == 0) return;
  kernels::launch_resolve_tokens(
      {ids.ptr<int32_t>(), table.ptr<int32_t>(), to_int(ids.numel(), "ids"), to_int(table.numel(), "table")},
      stream_, *policy_);
}

void CudaBackend::add_i32(Tensor a, Tensor b, int32_t c, Tensor out) {
  for (const Tensor* t : {&a, &b, &out}) expect(*t, DType::kI32, "add_i32", "operand");
  TPS_CHECK(a.numel() == out.numel() && b.numel() == out.numel(), "add_i32: ", a.shape_string(), " + ",
            b.shape_string(), " -> ", out.shape_string());
  if (out.numel() == 0) return;
  kernels::launch_add_i32(
      {a.ptr<int32_t>(), b.ptr<int32_t>(), c, out.ptr<int32_t>(), to_int(out.numel(), "n")}, stream_,
      *policy_);
}

void CudaBackend::scatter_i32(Tensor values, Tensor index, Tensor table) {
  for (const Tensor* t : {&values, &index, &table}) expect(*t, DType::kI32, "scatter_i32", "operand");
  TPS_CHECK(values.numel() == index.numel(), "scatter_i32: ", values.shape_string(), " by ",
            index.shape_string());
  if (values.numel() == 0) return;
  kernels::launch_scatter_i32({values.ptr<int32_t>(), index.ptr<int32_t>(), table.ptr<int32_t>(),
                               to_int(values.numel(), "n"), to_int(table.numel(), "table")},
                              stream_, *policy_);
}

void CudaBackend::draft_step_meta(Tensor positions, Tensor block_tables, int block_size, Tensor slot_mapping,
                                  Tensor context_lens) {
  for (const Tensor* t : {&positions, &block_tables, &slot_mapping, &context_lens})
    expect(*t, DType::kI32, "draft_step_meta", "operand");
  const int n = to_int(positions.numel(), "positions");
  TPS_CHECK(block_tables.ndim == 2 && block_tables.dim(0) >= n && slot_mapping.numel() == n &&
                context_lens.numel() == n,
            "draft_step_meta: positions ", positions.shape_string(), " block_tables ",
            block_tables.shape_string());
  if (n == 0) return;
  kernels::DraftStepMetaParams p;
  p.positions = positions.ptr<int32_t>();
  p.block_tables = block_tables.ptr<int32_t>();
  p.width = to_int(block_tables.dim(1), "width");
  p.block_size = block_size;
  p.slot_mapping = slot_mapping.ptr<int32_t>();
  p.context_lens = context_lens.ptr<int32_t>();
  p.n = n;
  kernels::launch_draft_step_meta(p, stream_, *policy_);
}

}  // namespace tpserve
