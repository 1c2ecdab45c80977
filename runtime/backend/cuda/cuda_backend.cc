// CudaBackend: start-up (device, arena, stream, staging, cuBLASLt), memory and copies, and the row ops
// (embedding, norms, add, linear, silu_mul, gather_rows). Attention, MoE and sampling ops live in
// cuda_attention_ops.cc, cuda_moe_ops.cc and cuda_sampling_ops.cc.
#include "runtime/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "common/cuda_check.h"
#include "common/log.h"
#include "kernels/add.h"
#include "kernels/embedding.h"
#include "kernels/gather_rows.h"
#include "kernels/gemv.h"
#include "kernels/launch.h"
#include "kernels/moe_experts.h"
#include "kernels/paged_attention.h"
#include "kernels/rmsnorm.h"
#include "kernels/router_fused.h"
#include "kernels/silu_mul.h"
#include "kernels/synthetic_fill.h"
#include "runtime/backend/cuda/cublaslt_gemm.h"
#include "runtime/backend/cuda/device_memory.h"
#include "runtime/backend/cuda/tensor_checks.h"

namespace tpserve {

using cuda_ops::bf16_mut;
using cuda_ops::bf16_ptr;
using cuda_ops::expect;
using cuda_ops::norm_params;
using cuda_ops::to_int;

size_t arena_bytes_for_fraction(double fraction, size_t total, size_t free) {
  TPS_CHECK(fraction > 0.0 && fraction <= 1.0, "runtime.gpu_memory_fraction must be in (0, 1], got ",
            fraction);
  TPS_CHECK(free <= total, "free memory ", free, " above the total ", total);
  const double budget = fraction * static_cast<double>(total), in_use = static_cast<double>(total - free);
  TPS_CHECK(budget > in_use, "runtime.gpu_memory_fraction ", fraction, " of ", total,
            " bytes leaves nothing: ", total - free, " bytes are already in use");
  const size_t share = static_cast<size_t>(budget - in_use);
  TPS_CHECK(free > kOutsideArenaBytes, "runtime.gpu_memory_fraction: only ", free, " bytes are free, and ",
            kOutsideArenaBytes, " are kept outside the arena (graphs, NCCL, cuBLASLt)");
  const size_t most = free - kOutsideArenaBytes;
  if (share > most)
    log_warn("runtime.gpu_memory_fraction ", fraction, " would leave ", free - share,
             " bytes outside the arena; the arena keeps ", kOutsideArenaBytes,
             " bytes free for graphs, NCCL and cuBLASLt (", most, " bytes instead of ", share, ")");
  return std::min(share, most);
}

int cuda_device_count(std::string* why) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    if (why != nullptr) *why = cuda_error_text(rc);
    cudaGetLastError();  // clear the error for later calls
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "cudaGetDeviceCount returned 0";
  return count;
}

CudaBackend::CudaBackend(const CudaBackendOptions& options) : device_(options.device), options_(options) {
  TPS_CHECK(options.kernels.attention_split_keys >= kernels::kAttentionKeysPerSplitQuantum &&
                options.kernels.attention_split_keys % kernels::kAttentionKeysPerSplitQuantum == 0,
            "CUDA backend: attention_split_keys ", options.kernels.attention_split_keys, " (a multiple of ",
            kernels::kAttentionKeysPerSplitQuantum, ")");
  std::string why;
  const int devices = cuda_device_count(&why);
  TPS_CHECK(devices > 0, "CUDA backend: no CUDA device (", why, ")");
  TPS_CHECK(device_ >= 0 && device_ < devices, "CUDA backend: device ", device_, " of ", devices);
  CUDA_CHECK(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  num_sms_ = prop.multiProcessorCount;
  staged_smem_limit_ = static_cast<size_t>(prop.sharedMemPerBlockOptin);
  router_fused_available_ = kernels::router_fused_available(prop.major * 10 + prop.minor);
  gate_up_bulk_available_ = kernels::moe_gate_up_bulk_available(prop.major * 10 + prop.minor);
  TPS_CHECK(options.kernels.router_fused_max_tokens >= 0 &&
                options.kernels.router_fused_max_tokens <= kernels::kRouterFusedMaxTokens,
            "CUDA backend: router_fused_max_tokens ", options.kernels.router_fused_max_tokens, " (0 to ",
            kernels::kRouterFusedMaxTokens, ")");
  TPS_CHECK(options.kernels.gemv_max_rows >= 0 && options.kernels.gemv_max_rows <= kLinearGemvMaxRows,
            "CUDA backend: gemv_max_rows ", options.kernels.gemv_max_rows, " (0 to ", kLinearGemvMaxRows,
            ")");
  if (options.kernels.staged_gemv) {
    // At most 216 KB a block, leaving an SM room for a small predecessor's block beside it.
    constexpr size_t kStagedSmemMax = size_t(216) << 10;
    gemv_options_.staged_sms = num_sms_;
    gemv_options_.staged_smem = std::min(kStagedSmemMax, static_cast<size_t>(prop.sharedMemPerBlockOptin));
    TPS_CHECK(options.kernels.staged_gemv_copy_groups >= 1 && options.kernels.staged_gemv_copy_groups <= 4,
              "CUDA backend: staged_gemv_copy_groups ", options.kernels.staged_gemv_copy_groups, " (1 to 4)");
    gemv_options_.staged_copy_groups = options.kernels.staged_gemv_copy_groups;
    gemv_options_.staged_x_global = options.kernels.staged_gemv_x_global;
    gemv_options_.staged_blocks_per_sm = options.kernels.staged_gemv_blocks_per_sm;
    gemv_options_.staged_max_warps = options.kernels.staged_gemv_max_warps;
    gemv_options_.staged_groups_in_flight = options.kernels.staged_gemv_groups_in_flight;
    gemv_options_.staged_weights_evict_first =
        options.kernels.weights_l2_evict_first && options.kernels.gemv_l2_evict_first;
  }
  gemv_after_attention_options_ = gemv_options_;
  const int after_attention_groups = options.kernels.attention_next_gemv_copy_groups;
  TPS_CHECK(after_attention_groups >= 0 && after_attention_groups <= 4,
            "CUDA backend: attention_next_gemv_copy_groups ", after_attention_groups, " (0 to 4)");
  if (after_attention_groups > 1) {
    gemv_after_attention_options_.staged_copy_groups = after_attention_groups;
    gemv_after_attention_options_.staged_groups_in_flight = 1;
  }

  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  size_t arena_bytes = options.arena_bytes;
  if (arena_bytes == 0)
    arena_bytes = arena_bytes_for_fraction(options.gpu_memory_fraction, total_bytes, free_bytes);
  const size_t reserved = options.workspace_bytes + options.cublas_workspace_bytes;
  TPS_CHECK(arena_bytes > reserved, "CUDA arena of ", arena_bytes, " bytes cannot hold the ", reserved,
            " bytes of workspace");

  policy_ = std::make_unique<kernels::LaunchPolicy>(options.pdl, options.kernels.staged_gemv);
  arena_ = std::make_unique<DeviceArena>(arena_bytes);
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  staging_bytes_ = std::max<size_t>(options.staging_bytes, 2 * 4096);
  h2d_staging_ = static_cast<char*>(cuda_malloc_host_counted(staging_bytes_));
  d2h_staging_ = static_cast<char*>(cuda_malloc_host_counted(staging_bytes_));
  for (auto& e : h2d_done_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&stream_idle_, cudaEventDisableTiming));
  scratch_ = std::make_unique<ScratchRegion>(arena_->allocate(options.workspace_bytes, "op workspace"),
                                             options.workspace_bytes);
  void* gemm_ws = arena_->allocate(options.cublas_workspace_bytes, "cuBLASLt workspace");
  gemm_ = std::make_unique<CublasLtGemm>(gemm_ws, options.cublas_workspace_bytes);
  // Outside the scratch region (other ops overwrite that): the counters must still be 0 at the next launch.
  // Zeroed on the stream, ahead of every kernel and graph replay (the stream does not sync with stream 0).
  attention_split_counter_capacity_ = kernels::attention_split_counter_capacity(num_sms_);
  const size_t counter_bytes = size_t(kernels::attention_split_counter_entries(num_sms_)) * sizeof(int32_t);
  attention_split_counters_ =
      static_cast<int32_t*>(arena_->allocate(counter_bytes, "attention split counters"));
  CUDA_CHECK(cudaMemsetAsync(attention_split_counters_, 0, counter_bytes, stream_));
  for (int head_dim : {32, 64, 128})
    attention_blocks_per_sm_[head_dim_slot(head_dim)] =
        kernels::attention_decode_blocks_per_sm(options.kernels.attention_tensor_cores, head_dim);
  std::vector<int32_t> identity(kMoeIdentityEntries);
  std::iota(identity.begin(), identity.end(), 0);
  moe_identity_ = static_cast<int32_t*>(arena_->allocate(identity.size() * sizeof(int32_t), "MoE identity"));
  // On the stream (non-blocking: a plain cudaMemcpy would not be ordered before its kernels); a pageable
  // source is staged before the call returns.
  CUDA_CHECK(cudaMemcpyAsync(moe_identity_, identity.data(), identity.size() * sizeof(int32_t),
                             cudaMemcpyHostToDevice, stream_));
  log_info("CUDA backend on device ", device_, " (", prop.name, ", sm_", prop.major, prop.minor, ", ",
           num_sms_, " SMs): arena ", static_cast<double>(arena_bytes) / (1 << 30), " GiB");
}

CudaBackend::~CudaBackend() {
  // No throwing here: report and go on releasing.
  auto report = [](cudaError_t rc, const char* what) {
    if (rc != cudaSuccess) log_error(what, ": ", cuda_error_text(rc));
  };
  report(cudaSetDevice(device_), "cudaSetDevice");
  // While an error unwinds, the stream may hold a collective whose peer is gone: do not wait for it.
  if (std::uncaught_exceptions() == 0) report(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  gemm_.reset();
  for (auto& e : h2d_done_) report(cudaEventDestroy(e), "cudaEventDestroy");
  report(cudaEventDestroy(stream_idle_), "cudaEventDestroy");
  report(cudaFreeHost(h2d_staging_), "cudaFreeHost");
  report(cudaFreeHost(d2h_staging_), "cudaFreeHost");
  report(cudaStreamDestroy(stream_), "cudaStreamDestroy");
  arena_.reset();
}

std::unique_ptr<CudaBackend> make_cuda_backend(const CudaBackendOptions& options) {
  return std::make_unique<CudaBackend>(options);
}

Tensor CudaBackend::alloc(DType dtype, std::initializer_list<int64_t> shape) {
  Tensor t(nullptr, dtype, Device::kCuda, shape);
  t.data = arena_->allocate(t.nbytes(), "alloc");
  if (t.nbytes() > 0) CUDA_CHECK(cudaMemsetAsync(t.data, 0, t.nbytes(), stream_));  // zeroed, as on the CPU
  return t;
}

void CudaBackend::copy_from_host(Tensor dst, const void* src) {
  TPS_CHECK(dst.device == Device::kCuda, "copy_from_host into a host tensor ", dst.shape_string());
  const size_t half = staging_bytes_ / 2, total = dst.nbytes();
  for (size_t offset = 0; offset < total; offset += half) {
    const size_t n = std::min(half, total - offset);
    const int i = h2d_next_;
    h2d_next_ = 1 - h2d_next_;
    char* stage = h2d_staging_ + i * half;
    CUDA_CHECK(cudaEventSynchronize(h2d_done_[i]));  // the previous copy out of this half has finished
    std::memcpy(stage, static_cast<const char*>(src) + offset, n);
    CUDA_CHECK(
        cudaMemcpyAsync(static_cast<char*>(dst.data) + offset, stage, n, cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaEventRecord(h2d_done_[i], stream_));
  }
}

void CudaBackend::copy_to_host(void* dst, Tensor src) {
  TPS_CHECK(src.device == Device::kCuda, "copy_to_host from a host tensor ", src.shape_string());
  const size_t total = src.nbytes();
  for (size_t offset = 0; offset < total; offset += staging_bytes_) {
    const size_t n = std::min(staging_bytes_, total - offset);
    CUDA_CHECK(cudaMemcpyAsync(d2h_staging_, static_cast<const char*>(src.data) + offset, n,
                               cudaMemcpyDeviceToHost, stream_));
    wait_for_stream();
    std::memcpy(static_cast<char*>(dst) + offset, d2h_staging_, n);
  }
}

void CudaBackend::zero(Tensor t) {
  if (t.nbytes() > 0) CUDA_CHECK(cudaMemsetAsync(t.data, 0, t.nbytes(), stream_));
}

bool CudaBackend::fill_synthetic(Tensor dst, const SyntheticSlice& slice) {
  expect(dst, DType::kBF16, "fill_synthetic", "dst");
  TPS_CHECK(dst.numel() == slice.numel(), "fill_synthetic: ", dst.shape_string(), " for a slice of ",
            slice.numel(), " elements");
  kernels::launch_synthetic_fill(kernels::make_synthetic_fill_params(bf16_mut(dst), slice), stream_,
                                 *policy_);
  return true;
}

void CudaBackend::synchronize() {
  wait_for_stream();
}

void CudaBackend::wait_for_stream() {
  if (!wait_hook_) {
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    return;
  }
  // Spin on the event (a decode step is a few ms: sleeping would add latency), and call the hook about
  // every millisecond.
  CUDA_CHECK(cudaEventRecord(stream_idle_, stream_));
  auto next_hook = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t rc = cudaEventQuery(stream_idle_);
    if (rc == cudaSuccess) return;
    if (rc != cudaErrorNotReady) CUDA_CHECK(rc);
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_hook) {
      wait_hook_();
      next_hook = now + std::chrono::milliseconds(1);
    }
    std::this_thread::yield();
  }
}

size_t CudaBackend::allocated_bytes() const {
  return arena_->used();
}

std::optional<size_t> CudaBackend::memory_left() const {
  return arena_->available();
}

void CudaBackend::embedding(Tensor ids, Tensor table, int64_t vocab_begin, Tensor out) {
  expect(ids, DType::kI32, "embedding", "ids");
  expect(table, DType::kBF16, "embedding", "table");
  expect(out, DType::kBF16, "embedding", "out");
  TPS_CHECK(table.ndim == 2 && table.dim(1) % 8 == 0 && out.numel() == ids.numel() * table.dim(1),
            "embedding: table ", table.shape_string(), " out ", out.shape_string(), " ids ",
            ids.shape_string());
  kernels::EmbeddingParams p;
  p.ids = ids.ptr<int32_t>();
  p.table = bf16_ptr(table);
  p.out = bf16_mut(out);
  p.vocab_begin = vocab_begin;
  p.vocab_rows = to_int(table.dim(0), "vocabulary rows");
  p.hidden = to_int(table.dim(1), "hidden");
  p.tokens = to_int(ids.numel(), "tokens");
  kernels::launch_embedding(p, stream_, *policy_);
}

namespace cuda_ops {
kernels::RmsNormParams norm_params(Tensor x, Tensor w, float eps, Tensor out, const char* op) {
  expect(x, DType::kBF16, op, "x");
  expect(w, DType::kBF16, op, "weight");
  expect(out, DType::kBF16, op, "out");
  const int64_t h = w.numel();
  TPS_CHECK(
      h > 0 && h % 8 == 0 && h <= kernels::kRmsNormMaxHidden && x.dim(-1) == h && out.numel() == x.numel(),
      op, ": x ", x.shape_string(), " weight ", w.shape_string(), " out ", out.shape_string(),
      " (hidden must be a multiple of 8, at most ", kernels::kRmsNormMaxHidden, ")");
  kernels::RmsNormParams p;
  p.x = bf16_ptr(x);
  p.weight = bf16_ptr(w);
  p.out = bf16_mut(out);
  p.hidden = static_cast<int>(h);
  p.tokens = to_int(x.numel() / h, "tokens");
  p.eps = eps;
  return p;
}
}  // namespace cuda_ops

void CudaBackend::note_norm_launch() {
  norm_launch_count_ = policy_->launches();
}

void CudaBackend::rmsnorm(Tensor x, Tensor w, float eps, Tensor out) {
  kernels::RmsNormParams p = norm_params(x, w, eps, out, "rmsnorm");
  p.weights_before_wait = options_.kernels.norm_loads_before_wait;
  kernels::launch_rmsnorm(p, stream_, *policy_);
  note_norm_launch();
}

void CudaBackend::add_rmsnorm(Tensor residual, Tensor x, Tensor w, float eps, Tensor out) {
  expect(residual, DType::kBF16, "add_rmsnorm", "residual");
  TPS_CHECK(residual.numel() == x.numel(), "add_rmsnorm: residual ", residual.shape_string(), " x ",
            x.shape_string());
  kernels::RmsNormParams p = norm_params(x, w, eps, out, "add_rmsnorm");
  p.residual = bf16_mut(residual);
  p.weights_before_wait = options_.kernels.norm_loads_before_wait;
  kernels::launch_rmsnorm(p, stream_, *policy_);
  note_norm_launch();
}

void CudaBackend::add(Tensor inout, Tensor x) {
  expect(inout, DType::kBF16, "add", "inout");
  expect(x, DType::kBF16, "add", "x");
  TPS_CHECK(inout.numel() == x.numel(), "add: ", inout.shape_string(), " += ", x.shape_string());
  cuda_ops::expect_aligned16(inout, "add", "inout");
  cuda_ops::expect_aligned16(x, "add", "x");
  kernels::launch_add({bf16_mut(inout), bf16_ptr(x), inout.numel()}, stream_, *policy_);
}

void CudaBackend::linear(Tensor x, Tensor w, Tensor out) {
  linear_from(x, w, out, nullptr);
}

const kernels::GemvLaunchOptions* CudaBackend::linear_gemv_options(int64_t m, Tensor w,
                                                                   bool after_attention) const {
  if (m > options_.kernels.gemv_max_rows || w.nbytes() >= kLinearCublasMinWeightBytes) return nullptr;
  return after_attention && m <= options_.kernels.attention_next_gemv_max_rows
             ? &gemv_after_attention_options_
             : &gemv_options_;
}

bool CudaBackend::linear_after_attention_merges(Tensor x, Tensor w) const {
  if (w.ndim != 2 || w.dim(1) == 0 || x.numel() != w.dim(1)) return false;
  const kernels::GemvLaunchOptions* o = linear_gemv_options(1, w, true);
  kernels::GemvParams p;
  p.m = 1, p.n = static_cast<int>(w.dim(0)), p.k = static_cast<int>(w.dim(1));
  return o != nullptr && kernels::gemv_merges_attention_partials(p, *o);
}

void CudaBackend::linear_from(Tensor x, Tensor w, Tensor out, const kernels::AttentionPartials* partials) {
  expect(x, DType::kBF16, "linear", "x");
  expect(w, DType::kBF16, "linear", "weight");
  TPS_CHECK(out.device == Device::kCuda && (out.dtype == DType::kBF16 || out.dtype == DType::kF32),
            "linear: out must be a CUDA bf16 or f32 tensor, got ", out.shape_string());
  TPS_CHECK(w.ndim == 2, "linear: weight ", w.shape_string());
  const int64_t n = w.dim(0), k = w.dim(1);
  TPS_CHECK(x.dim(-1) == k && out.dim(-1) == n && k % 8 == 0 && x.numel() / k == out.numel() / n,
            "linear: x ", x.shape_string(), " w ", w.shape_string(), " out ", out.shape_string(),
            " (K a multiple of 8)");
  for (const Tensor* t : {&x, &w, &out}) cuda_ops::expect_aligned16(*t, "linear", "an operand");
  const int m = to_int(x.numel() / k, "rows");
  const kernels::GemvLaunchOptions* gemv =
      linear_gemv_options(m, w, std::exchange(gemv_follows_attention_, false));
  const bool after_norm = policy_->launches() == norm_launch_count_ &&
                          m <= options_.kernels.norm_next_gemv_trigger_early_max_rows;
  if (m == 0) return;
  const bool out_f32 = out.dtype == DType::kF32;
  if (gemv != nullptr) {
    kernels::GemvParams p;
    p.x = bf16_ptr(x);
    p.w = bf16_ptr(w);
    if (out_f32)
      p.out_f32 = out.ptr<float>();
    else
      p.out_bf16 = bf16_mut(out);
    p.m = m;
    p.n = to_int(n, "out features");
    p.k = to_int(k, "in features");
    if (partials != nullptr) p.x_partials = *partials, ++gemv_attention_merge_launches_;
    kernels::GemvLaunchOptions o = *gemv;
    o.staged_trigger_before_wait = after_norm;
    const bool staged = kernels::launch_gemv(p, stream_, *policy_, o);
    gemv_early_trigger_launches_ += staged && after_norm;
    return;
  }
  TPS_CHECK(partials == nullptr, "linear: attention partials need the GEMV, not cuBLASLt");
  gemm_->run(x.data, w.data, out.data, out_f32, m, to_int(n, "out features"), to_int(k, "in features"),
             stream_);
}

void CudaBackend::silu_mul(Tensor gate_up, Tensor out) {
  expect(gate_up, DType::kBF16, "silu_mul", "gate_up");
  expect(out, DType::kBF16, "silu_mul", "out");
  const int64_t inter = out.dim(-1), rows = out.numel() / std::max<int64_t>(inter, 1);
  TPS_CHECK(gate_up.numel() == 2 * out.numel(), "silu_mul: gate_up ", gate_up.shape_string(), " out ",
            out.shape_string());
  kernels::launch_silu_mul({bf16_ptr(gate_up), bf16_mut(out), to_int(rows, "rows"), to_int(inter, "inter")},
                           stream_, *policy_);
}

void CudaBackend::gather_rows(Tensor x, Tensor rows, Tensor out) {
  expect(rows, DType::kI32, "gather_rows", "rows");
  TPS_CHECK(x.device == Device::kCuda && out.device == Device::kCuda && x.dtype == out.dtype &&
                x.row_numel() == out.row_numel() && out.dim(0) == rows.numel(),
            "gather_rows: x ", x.shape_string(), " rows ", rows.shape_string(), " out ", out.shape_string());
  kernels::GatherRowsParams p;
  p.x = x.data;
  p.rows = rows.ptr<int32_t>();
  p.out = out.data;
  p.num_rows = to_int(rows.numel(), "rows");
  p.row_bytes = x.row_numel() * static_cast<int64_t>(dtype_size(x.dtype));
  kernels::launch_gather_rows(p, stream_, *policy_);
}

}  // namespace tpserve
