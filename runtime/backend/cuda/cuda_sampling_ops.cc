// CudaBackend sampling ops: per-rank candidates (two-stage exact top-C), logit adjustments and token masks,
// and the merge + filters + draw.
#include <algorithm>

#include "kernels/logit_adjust.h"
#include "kernels/logit_mask.h"
#include "kernels/sample.h"
#include "kernels/sampling_candidates.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/device_memory.h"
#include "runtime/backend/cuda/tensor_checks.h"

namespace tpserve {

using cuda_ops::expect;
using cuda_ops::to_int;

void CudaBackend::sampling_candidates(Tensor logits, int64_t vocab_begin, Tensor temperature, Tensor values,
                                      Tensor ids, Tensor stats) {
  const char* op = "sampling_candidates";
  expect(logits, DType::kF32, op, "logits");
  expect(temperature, DType::kF32, op, "temperature");
  expect(values, DType::kF32, op, "values");
  expect(ids, DType::kI32, op, "ids");
  expect(stats, DType::kF32, op, "stats");
  const int rows = to_int(logits.dim(0), "rows"), vocab = to_int(logits.dim(1), "vocabulary");
  const int c = to_int(values.dim(-1), "candidates");
  TPS_CHECK(c >= 1 && c <= std::min(vocab, kernels::kMaxSamplingCandidates) &&
                values.numel() == int64_t(rows) * c && ids.numel() == values.numel() &&
                stats.numel() == int64_t(rows) * 2 && temperature.numel() >= rows,
            op, ": logits ", logits.shape_string(), " values ", values.shape_string(), " ids ",
            ids.shape_string(), " stats ", stats.shape_string(), " (at most ",
            kernels::kMaxSamplingCandidates, " candidates)");
  if (rows == 0) return;
  kernels::SamplingCandidatesParams p;
  p.vocab_begin = vocab_begin;
  p.vocab = vocab;
  p.candidates = c;
  const size_t per_row = kernels::plan_sampling_candidates(p) + 3 * DeviceArena::kAlignment;
  const int rows_per_pass =
      std::max<int>(1, static_cast<int>(std::min<size_t>(rows, scratch_->bytes() / per_row)));
  for (int r0 = 0; r0 < rows; r0 += rows_per_pass) {
    const int n = std::min(rows_per_pass, rows - r0);
    ScratchRegion::Cursor scratch(*scratch_);
    p.logits = logits.ptr<float>() + int64_t(r0) * vocab;
    p.temperature = temperature.ptr<float>() + r0;
    p.values = values.ptr<float>() + int64_t(r0) * c;
    p.ids = ids.ptr<int32_t>() + int64_t(r0) * c;
    p.stats = stats.ptr<float>() + int64_t(r0) * 2;
    p.rows = n;
    const size_t slots = size_t(n) * p.num_chunks * c;
    p.chunk_values = scratch.take<float>(slots, "sampling chunk values");
    p.chunk_ids = scratch.take<int32_t>(slots, "sampling chunk ids");
    p.chunk_stats = scratch.take<float>(size_t(n) * p.num_chunks * 2, "sampling chunk stats");
    kernels::launch_sampling_candidates(p, stream_, *policy_);
  }
}

void CudaBackend::adjust_logits(Tensor logits, int64_t vocab_begin, Tensor targets, Tensor values) {
  const char* op = "adjust_logits";
  expect(logits, DType::kF32, op, "logits");
  expect(targets, DType::kI32, op, "targets");
  expect(values, DType::kF32, op, "values");
  const int n = to_int(targets.dim(0), "adjustments");
  TPS_CHECK(logits.ndim == 2 && targets.numel() == int64_t(n) * 2 && values.numel() == int64_t(n) * 3, op,
            ": logits ", logits.shape_string(), " targets ", targets.shape_string(), " values ",
            values.shape_string());
  kernels::LogitAdjustParams p;
  p.logits = logits.ptr<float>();
  p.targets = targets.ptr<int32_t>();
  p.values = values.ptr<float>();
  p.vocab_begin = vocab_begin;
  p.vocab = to_int(logits.dim(1), "vocabulary");
  p.rows = to_int(logits.dim(0), "rows");
  p.n = n;
  kernels::launch_logit_adjust(p, stream_, *policy_);
}

void CudaBackend::mask_logits(Tensor logits, int64_t vocab_begin, Tensor rows, Tensor masks) {
  const char* op = "mask_logits";
  expect(logits, DType::kF32, op, "logits");
  expect(rows, DType::kI32, op, "rows");
  expect(masks, DType::kI32, op, "masks");
  const int n = to_int(rows.numel(), "masks");
  const int vocab = to_int(logits.dim(1), "vocabulary");
  TPS_CHECK(logits.ndim == 2 && masks.ndim == 2 && masks.dim(0) == n &&
                (vocab_begin + vocab + 31) / 32 <= masks.dim(1),
            op, ": logits ", logits.shape_string(), " from ", vocab_begin, " rows ", rows.shape_string(),
            " masks ", masks.shape_string());
  kernels::LogitMaskParams p;
  p.logits = logits.ptr<float>();
  p.rows = rows.ptr<int32_t>();
  p.masks = reinterpret_cast<const uint32_t*>(masks.ptr<int32_t>());
  p.vocab_begin = vocab_begin;
  p.vocab = vocab;
  p.num_rows = to_int(logits.dim(0), "rows");
  p.words = to_int(masks.dim(1), "mask words");
  p.n = n;
  kernels::launch_logit_mask(p, stream_, *policy_);
}

kernels::SampleParams CudaBackend::sample_params(Tensor values, Tensor ids, Tensor stats,
                                                 const SamplingInputs& params, Tensor tokens,
                                                 const char* op) const {
  expect(values, DType::kF32, op, "values");
  expect(ids, DType::kI32, op, "ids");
  expect(stats, DType::kF32, op, "stats");
  expect(tokens, DType::kI32, op, "tokens");
  expect(params.temperature, DType::kF32, op, "temperature");
  expect(params.top_k, DType::kI32, op, "top_k");
  expect(params.top_p, DType::kF32, op, "top_p");
  expect(params.min_p, DType::kF32, op, "min_p");
  expect(params.seed, DType::kI64, op, "seed");
  expect(params.counter, DType::kI64, op, "counter");
  TPS_CHECK(values.ndim == 3 && ids.numel() == values.numel() &&
                stats.numel() == values.dim(0) * values.dim(1) * 2 && tokens.numel() == values.dim(1) &&
                values.dim(2) <= kernels::kMaxSamplingCandidates,
            op, ": values ", values.shape_string(), " ids ", ids.shape_string(), " stats ",
            stats.shape_string(), " tokens ", tokens.shape_string());
  kernels::SampleParams p;
  p.values = values.ptr<float>();
  p.ids = ids.ptr<int32_t>();
  p.stats = stats.ptr<float>();
  p.temperature = params.temperature.ptr<float>();
  p.top_k = params.top_k.ptr<int32_t>();
  p.top_p = params.top_p.ptr<float>();
  p.min_p = params.min_p.ptr<float>();
  p.seed = params.seed.ptr<int64_t>();
  p.counter = params.counter.ptr<int64_t>();
  p.tokens = tokens.ptr<int32_t>();
  p.ranks = to_int(values.dim(0), "ranks");
  p.rows = to_int(values.dim(1), "rows");
  p.candidates = to_int(values.dim(2), "candidates");
  return p;
}

void CudaBackend::sample(Tensor values, Tensor ids, Tensor stats, const SamplingInputs& params,
                         Tensor tokens) {
  if (values.dim(1) == 0) return;
  kernels::launch_sample(sample_params(values, ids, stats, params, tokens, "sample"), stream_, *policy_);
}

// Three launches: each row's draft (from the next row's input token), the per-row draw and acceptance
// (the sampling kernel), then the left-to-right walk per group.
void CudaBackend::verify_and_sample(Tensor values, Tensor ids, Tensor stats, const SamplingInputs& params,
                                    Tensor row_tokens, Tensor group_start, Tensor emitted, Tensor accepted) {
  const char* op = "verify_and_sample";
  expect(row_tokens, DType::kI32, op, "row_tokens");
  expect(group_start, DType::kI32, op, "group_start");
  expect(emitted, DType::kI32, op, "emitted");
  expect(accepted, DType::kI32, op, "accepted");
  const int rows = to_int(values.dim(1), "rows"), groups = to_int(accepted.numel(), "groups");
  TPS_CHECK(row_tokens.numel() == rows && emitted.numel() == rows && group_start.numel() == groups + 1, op,
            ": rows ", rows, " row_tokens ", row_tokens.shape_string(), " group_start ",
            group_start.shape_string(), " emitted ", emitted.shape_string(), " accepted ",
            accepted.shape_string());
  if (rows == 0) return;
  ScratchRegion::Cursor scratch(*scratch_);
  kernels::VerifyGroupsParams v;
  v.row_tokens = row_tokens.ptr<int32_t>();
  v.group_start = group_start.ptr<int32_t>();
  v.drafts = scratch.take<int32_t>(rows, "verify drafts");
  int32_t* draws = scratch.take<int32_t>(rows, "verify draws");
  int32_t* accept = scratch.take<int32_t>(rows, "verify accept flags");
  v.draws = draws;
  v.accept = accept;
  v.emitted = emitted.ptr<int32_t>();
  v.accepted = accepted.ptr<int32_t>();
  v.groups = groups;
  kernels::launch_verify_drafts(v, rows, stream_, *policy_);
  Tensor draw_tensor(draws, DType::kI32, Device::kCuda, {rows});
  kernels::SampleParams p = sample_params(values, ids, stats, params, draw_tensor, op);
  p.drafts = v.drafts;
  p.accept = accept;
  kernels::launch_sample(p, stream_, *policy_);
  kernels::launch_verify_groups(v, stream_, *policy_);
}

}  // namespace tpserve
