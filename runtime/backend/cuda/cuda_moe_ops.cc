// CudaBackend MoE ops: the fused experts (align on the GPU -> gate_up -> down -> deterministic
// combine), and the expert-parallel pack / expert rows / combine.
#include <algorithm>

#include "kernels/moe_align.h"
#include "kernels/moe_combine.h"
#include "kernels/moe_experts.h"
#include "kernels/moe_pack.h"
#include "kernels/rmsnorm.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/device_memory.h"
#include "runtime/backend/cuda/tensor_checks.h"

namespace tpserve {

using cuda_ops::bf16_mut;
using cuda_ops::bf16_ptr;
using cuda_ops::expect;
using cuda_ops::norm_params;
using cuda_ops::to_int;

namespace {

void expect_experts(const Tensor& gate_up, const Tensor& down, int64_t hidden, const char* op) {
  expect(gate_up, DType::kBF16, op, "gate_up");
  expect(down, DType::kBF16, op, "down");
  TPS_CHECK(gate_up.ndim == 3 && down.ndim == 3 && gate_up.dim(2) == hidden &&
                down.dim(0) == gate_up.dim(0) && down.dim(1) == hidden && down.dim(2) * 2 == gate_up.dim(1) &&
                hidden % 8 == 0 && down.dim(2) % 8 == 0,
            op, ": gate_up ", gate_up.shape_string(), " down ", down.shape_string(), " hidden ", hidden,
            " (hidden and intermediate multiples of 8)");
  TPS_CHECK(gate_up.dim(0) <= kernels::kMoeMaxExperts, op, ": ", gate_up.dim(0), " local experts, at most ",
            kernels::kMoeMaxExperts);
}

// Scratch bytes for `assignments` assignments: sorted list, work items, intermediate and (optionally) the
// per-assignment f32 outputs, each rounded up to the arena alignment.
size_t moe_scratch_bytes(int assignments, int experts, int hidden, int inter, bool f32_out) {
  auto round = [](size_t n) { return align_up(n, DeviceArena::kAlignment); };
  const size_t a = static_cast<size_t>(assignments);
  size_t bytes = round(a * 4) + round(size_t(kernels::moe_max_work_items(assignments, experts)) * 12) +
                 round(4) + round(a * inter * 2);
  if (f32_out) bytes += round(a * hidden * 4);
  return bytes;
}

// The largest number of rows (each with `per_row` assignments) whose MoE scratch fits, at most `rows`.
int moe_rows_per_chunk(int rows, int per_row, int experts, int hidden, int inter, bool f32_out,
                       size_t scratch) {
  constexpr int kMaxGridY = 65535;  // work items are blockIdx.y
  int fit = std::max(1, std::min(rows, kMaxGridY / per_row));
  while (fit > 1 && moe_scratch_bytes(fit * per_row, experts, hidden, inter, f32_out) > scratch) fit /= 2;
  TPS_CHECK(moe_scratch_bytes(fit * per_row, experts, hidden, inter, f32_out) <= scratch,
            "CUDA workspace too small for one MoE row (CudaBackendOptions::workspace_bytes)");
  return fit;
}

// Sorts `assignments` expert ids by expert (moe_align) and runs the expert kernels on them. `e` comes with
// its inputs and outputs set (x, x_row_divisor, weights, sizes, y_f32 or y_bf16); the routing lists and the
// intermediate are taken from `scratch` here.
void align_and_run_experts(const int32_t* expert_of, int assignments, int expert_begin, int experts,
                           kernels::MoeExpertsParams e, ScratchRegion::Cursor& scratch, cudaStream_t stream,
                           const kernels::LaunchPolicy& policy) {
  kernels::MoeAlignParams align;
  align.expert_of = expert_of;
  align.num_assignments = assignments;
  align.expert_begin = expert_begin;
  align.num_experts = experts;
  align.max_work = kernels::moe_max_work_items(assignments, experts);
  align.sorted = scratch.take<int32_t>(assignments, "MoE sorted assignments");
  align.work = scratch.take<int32_t>(size_t(align.max_work) * 3, "MoE work items");
  align.num_work = scratch.take<int32_t>(1, "MoE work count");
  kernels::launch_moe_align(align, stream, policy);

  e.sorted = align.sorted;
  e.work = align.work;
  e.num_work = align.num_work;
  e.max_work = align.max_work;
  e.act = scratch.take<kernels::bf16>(size_t(assignments) * e.inter, "MoE intermediate");
  kernels::launch_moe_experts(e, stream, policy);
}

}  // namespace

void CudaBackend::set_moe_kernel_options(kernels::MoeExpertsParams& e, int tokens) const {
  e.down_loads_before_wait = options_.kernels.moe_down_early_loads;
  e.stage_down = options_.kernels.moe_down_staged;
  e.down_act_before_weights = options_.kernels.moe_down_act_before_weights;
  e.staged_smem = staged_smem_limit_;
  e.weights_evict_first = options_.kernels.weights_l2_evict_first;
  const int bulk_min = options_.kernels.moe_gate_up_bulk_min_tokens;
  e.gate_up_bulk = gate_up_bulk_available_ && bulk_min > 0 && tokens >= bulk_min;
  e.gate_up_bulk_stages = tokens == 1 ? options_.kernels.moe_gate_up_bulk_stages_one_token
                                      : options_.kernels.moe_gate_up_bulk_stages;
  e.gate_up_bulk_cols =
      tokens == 1 ? options_.kernels.moe_gate_up_bulk_cols_one_token : options_.kernels.moe_gate_up_bulk_cols;
  e.gate_up_bulk_rotate = tokens <= options_.kernels.moe_gate_up_bulk_rotate_max_tokens;
}

// Checks moe_experts' arguments; fills the sizes.
CudaBackend::MoeShape CudaBackend::moe_shape(Tensor x, Tensor gate_up, Tensor down, Tensor topk_ids,
                                             Tensor topk_weights, Tensor out, const char* op) const {
  expect(x, DType::kBF16, op, "x");
  expect(out, DType::kBF16, op, "out");
  expect(topk_ids, DType::kI32, op, "topk ids");
  expect(topk_weights, DType::kF32, op, "topk weights");
  MoeShape s;
  s.hidden = to_int(x.dim(-1), "hidden");
  s.tokens = to_int(x.numel() / std::max(s.hidden, 1), "tokens");
  expect_experts(gate_up, down, s.hidden, op);
  s.k = to_int(topk_ids.dim(-1), "k");
  s.experts = to_int(gate_up.dim(0), "experts");
  s.inter = to_int(down.dim(2), "intermediate");
  TPS_CHECK(topk_ids.numel() == int64_t(s.tokens) * s.k && topk_weights.numel() == topk_ids.numel() &&
                out.numel() == x.numel(),
            op, ": x ", x.shape_string(), " ids ", topk_ids.shape_string(), " weights ",
            topk_weights.shape_string(), " out ", out.shape_string());
  return s;
}

kernels::MoeCombineParams CudaBackend::launch_moe_chunk(Tensor x, Tensor gate_up, Tensor down,
                                                        Tensor topk_ids, Tensor topk_weights,
                                                        int expert_begin, const MoeShape& s, int t0, int n,
                                                        ScratchRegion::Cursor& scratch) {
  const int k = s.k, assignments = n * k;
  const int32_t* ids = topk_ids.ptr<int32_t>() + int64_t(t0) * k;
  kernels::MoeExpertsParams e;
  set_moe_kernel_options(e, n);
  e.x = bf16_ptr(x) + int64_t(t0) * s.hidden;
  e.x_row_divisor = k;
  e.gate_up = bf16_ptr(gate_up);
  e.down = bf16_ptr(down);
  e.y_f32 = scratch.take<float>(size_t(assignments) * s.hidden, "MoE expert outputs");
  e.hidden = s.hidden;
  e.inter = s.inter;
  if (options_.kernels.moe_one_token_direct && n == 1 && assignments <= kMoeIdentityEntries) {
    // One token: its k experts are distinct, so each assignment is its own work item (no align launch).
    e.slot_experts = ids;
    e.expert_begin = expert_begin;
    e.local_experts = s.experts;
    e.sorted = moe_identity_;
    e.max_work = assignments;
    e.act = scratch.take<kernels::bf16>(size_t(assignments) * s.inter, "MoE intermediate");
    kernels::launch_moe_experts(e, stream_, *policy_);
  } else {
    align_and_run_experts(ids, assignments, expert_begin, s.experts, e, scratch, stream_, *policy_);
  }
  kernels::MoeCombineParams c;
  c.one_slot_at_a_time = !options_.kernels.moe_combine_batched_loads;
  c.y_f32 = e.y_f32;
  c.topk_ids = ids;
  c.expert_begin = expert_begin;
  c.num_experts = s.experts;
  c.weights = topk_weights.ptr<float>() + int64_t(t0) * k;
  c.tokens = n;
  c.k = k;
  c.hidden = s.hidden;
  return c;
}

void CudaBackend::moe_experts(Tensor x, Tensor gate_up, Tensor down, Tensor topk_ids, Tensor topk_weights,
                              int expert_begin, Tensor out) {
  const MoeShape s = moe_shape(x, gate_up, down, topk_ids, topk_weights, out, "moe_experts");
  if (s.tokens == 0) return;
  const int chunk = moe_rows_per_chunk(s.tokens, s.k, s.experts, s.hidden, s.inter, true, scratch_->bytes());
  for (int t0 = 0; t0 < s.tokens; t0 += chunk) {
    ScratchRegion::Cursor scratch(*scratch_);
    kernels::MoeCombineParams c = launch_moe_chunk(x, gate_up, down, topk_ids, topk_weights, expert_begin, s,
                                                   t0, std::min(chunk, s.tokens - t0), scratch);
    c.out = bf16_mut(out) + int64_t(t0) * s.hidden;
    kernels::launch_moe_combine(c, stream_, *policy_);
  }
}

void CudaBackend::moe_experts_add_rmsnorm(Tensor x, Tensor gate_up, Tensor down, Tensor topk_ids,
                                          Tensor topk_weights, int expert_begin, Tensor out, Tensor residual,
                                          Tensor norm_w, float eps, Tensor normed) {
  const MoeShape s = moe_shape(x, gate_up, down, topk_ids, topk_weights, out, "moe_experts_add_rmsnorm");
  const int chunk = s.tokens == 0 ? 0
                                  : moe_rows_per_chunk(s.tokens, s.k, s.experts, s.hidden, s.inter, true,
                                                       scratch_->bytes());
  // Several chunks (combine each, then the norm) or a row too long for the fused kernel: the two ops.
  if (!options_.kernels.moe_fused_norm || s.tokens == 0 || chunk < s.tokens ||
      s.hidden > kernels::kRmsNormCombineMaxHidden) {
    Backend::moe_experts_add_rmsnorm(x, gate_up, down, topk_ids, topk_weights, expert_begin, out, residual,
                                     norm_w, eps, normed);
    return;
  }
  expect(residual, DType::kBF16, "moe_experts_add_rmsnorm", "residual");
  TPS_CHECK(residual.numel() == x.numel(), "moe_experts_add_rmsnorm: residual ", residual.shape_string(),
            " x ", x.shape_string());
  ScratchRegion::Cursor scratch(*scratch_);
  kernels::RmsNormParams p = norm_params(out, norm_w, eps, normed, "moe_experts_add_rmsnorm");
  p.x = nullptr;  // from the combine: out is not written
  p.residual = bf16_mut(residual);
  p.weights_before_wait = options_.kernels.norm_loads_before_wait;
  p.combine_routing_before_wait = options_.kernels.moe_combine_early_routing;
  p.combine =
      launch_moe_chunk(x, gate_up, down, topk_ids, topk_weights, expert_begin, s, 0, s.tokens, scratch);
  kernels::launch_rmsnorm(p, stream_, *policy_);
  note_norm_launch();
}

void CudaBackend::moe_experts_rows(Tensor rows, Tensor expert_ids, Tensor gate_up, Tensor down, Tensor out) {
  const char* op = "moe_experts_rows";
  expect(rows, DType::kBF16, op, "rows");
  expect(out, DType::kBF16, op, "out");
  expect(expert_ids, DType::kI32, op, "expert ids");
  const int hidden = to_int(rows.dim(-1), "hidden"), n = to_int(rows.numel() / std::max(hidden, 1), "rows");
  expect_experts(gate_up, down, hidden, op);
  TPS_CHECK(expert_ids.numel() == n && out.numel() == rows.numel(), op, ": rows ", rows.shape_string(),
            " ids ", expert_ids.shape_string(), " out ", out.shape_string());
  const int experts = to_int(gate_up.dim(0), "experts"), inter = to_int(down.dim(2), "intermediate");
  if (n == 0) return;
  const int chunk = moe_rows_per_chunk(n, 1, experts, hidden, inter, false, scratch_->bytes());
  for (int r0 = 0; r0 < n; r0 += chunk) {
    const int count = std::min(chunk, n - r0);
    ScratchRegion::Cursor scratch(*scratch_);
    kernels::MoeExpertsParams e;
    set_moe_kernel_options(e, count);
    e.x = bf16_ptr(rows) + int64_t(r0) * hidden;
    e.x_row_divisor = 1;
    e.gate_up = bf16_ptr(gate_up);
    e.down = bf16_ptr(down);
    e.y_bf16 = bf16_mut(out) + int64_t(r0) * hidden;  // rows without an expert stay untouched
    e.hidden = hidden;
    e.inter = inter;
    // ids are local; -1 (unused row) falls outside [0, E)
    align_and_run_experts(expert_ids.ptr<int32_t>() + r0, count, 0, experts, e, scratch, stream_, *policy_);
  }
}

void CudaBackend::moe_pack(Tensor x, Tensor topk_ids, int experts_per_rank, Tensor send_x, Tensor send_expert,
                           Tensor origin) {
  const char* op = "moe_pack";
  expect(x, DType::kBF16, op, "x");
  expect(topk_ids, DType::kI32, op, "topk ids");
  expect(send_x, DType::kBF16, op, "send_x");
  expect(send_expert, DType::kI32, op, "send_expert");
  expect(origin, DType::kI32, op, "origin");
  TPS_CHECK(send_x.ndim == 3 && send_x.dim(2) == x.dim(-1) && x.dim(-1) % 8 == 0 &&
                send_expert.numel() == send_x.dim(0) * send_x.dim(1) && origin.numel() == topk_ids.numel() &&
                send_x.dim(0) <= kernels::kMoePackMaxPeers && experts_per_rank > 0,
            op, ": x ", x.shape_string(), " send_x ", send_x.shape_string(), " send_expert ",
            send_expert.shape_string(), " origin ", origin.shape_string());
  kernels::MoePackParams p;
  p.x = bf16_ptr(x);
  p.topk_ids = topk_ids.ptr<int32_t>();
  p.send_x = bf16_mut(send_x);
  p.send_expert = send_expert.ptr<int32_t>();
  p.origin = origin.ptr<int32_t>();
  p.hidden = to_int(x.dim(-1), "hidden");
  p.tokens = to_int(x.numel() / p.hidden, "tokens");
  p.k = to_int(topk_ids.dim(-1), "k");
  p.experts_per_rank = experts_per_rank;
  p.peers = to_int(send_x.dim(0), "peers");
  p.capacity = to_int(send_x.dim(1), "capacity");
  kernels::launch_moe_pack(p, stream_, *policy_);
}

void CudaBackend::moe_combine(Tensor results, Tensor origin, Tensor topk_weights, Tensor out) {
  const char* op = "moe_combine";
  expect(results, DType::kBF16, op, "results");
  expect(origin, DType::kI32, op, "origin");
  expect(topk_weights, DType::kF32, op, "topk weights");
  expect(out, DType::kBF16, op, "out");
  const int hidden = to_int(out.dim(-1), "hidden"),
            tokens = to_int(out.numel() / std::max(hidden, 1), "tokens");
  TPS_CHECK(hidden % 8 == 0 && results.dim(-1) == hidden && origin.numel() == topk_weights.numel() &&
                origin.numel() % std::max(tokens, 1) == 0,
            op, ": results ", results.shape_string(), " origin ", origin.shape_string(), " out ",
            out.shape_string());
  if (tokens == 0) return;
  kernels::MoeCombineParams c;
  c.one_slot_at_a_time = !options_.kernels.moe_combine_batched_loads;
  c.y_bf16 = bf16_ptr(results);
  c.origin = origin.ptr<int32_t>();
  c.weights = topk_weights.ptr<float>();
  c.out = bf16_mut(out);
  c.tokens = tokens;
  c.k = to_int(origin.numel() / tokens, "k");
  c.hidden = hidden;
  kernels::launch_moe_combine(c, stream_, *policy_);
}

}  // namespace tpserve
