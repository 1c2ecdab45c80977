// The CUDA backend: every Backend op on one GPU, bf16 weights and activations (router and lm_head logits,
// sampling values and gating weights in f32, ids in i32), kernels from kernels/ launched through the launch
// policy on one stream, dense projections through a small-M GEMV or cuBLASLt.
//
// Memory: one arena allocated at start-up (alloc() hands out pieces of it; nothing is allocated or freed
// afterwards), a per-op scratch region inside it, pinned staging buffers for host copies. Ops only enqueue
// work; copy_to_host is the one place that waits.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>

#include "kernels/gemv.h"
#include "kernels/moe_combine.h"
#include "kernels/paged_attention.h"
#include "kernels/policy.h"
#include "kernels/sample.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/cuda/device_memory.h"
#include "runtime/backend/cuda_kernel_switches.h"

namespace tpserve {

namespace kernels {
class LaunchPolicy;
struct MoeExpertsParams;
}  // namespace kernels
class CublasLtGemm;

// The most rows linear() can give the GEMV (its limit); CudaKernelSwitches::gemv_max_rows sets where
// cuBLASLt takes over below that (8: measured A/B on an H200, docs/PERF.md). The GEMV reads each weight once
// with 16-byte loads whatever M is, where cuBLASLt pads M to its tile (64+) and splits K.
inline constexpr int kLinearGemvMaxRows = kernels::kGemvMaxTokens;
// Weights of at least this many bytes (an lm_head: 622 MB for Qwen3-30B-A3B) take cuBLASLt whatever M: its
// tiles stream such a matrix at 91-93% of HBM bandwidth at M = 1-16, where the GEMV reaches 47-86% (bench/ops
// on an H200, docs/PERF.md); PDL overlap is negligible against a 150 us read.
inline constexpr size_t kLinearCublasMinWeightBytes = size_t(64) << 20;

struct CudaBackendOptions {
  int device = 0;
  kernels::PdlSettings pdl;  // kill_switch: the caller fills it from the environment
  // Arena size; 0 = gpu_memory_fraction of the device's memory, less what is already in use.
  size_t arena_bytes = 0;
  double gpu_memory_fraction = 0.9;
  size_t workspace_bytes = size_t(256) << 20;  // per-op scratch (MoE routing, attention splits, sampling)
  size_t cublas_workspace_bytes = size_t(32) << 20;
  size_t staging_bytes = size_t(32) << 20;  // pinned host buffers for copies, each way
  CudaKernelSwitches kernels;  // which kernel form each op takes (runtime/backend/cuda_kernel_switches.h)
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  Device device() const override { return Device::kCuda; }
  DType weight_dtype() const override { return DType::kBF16; }
  DType activation_dtype() const override { return DType::kBF16; }

  Tensor alloc(DType dtype, std::initializer_list<int64_t> shape) override;
  void copy_from_host(Tensor dst, const void* src) override;
  void copy_to_host(void* dst, Tensor src) override;
  void zero(Tensor t) override;
  void synchronize() override;
  bool fill_synthetic(Tensor dst, const SyntheticSlice& slice) override;
  size_t allocated_bytes() const override;

  void embedding(Tensor ids, Tensor table, int64_t vocab_begin, Tensor out) override;
  void rmsnorm(Tensor x, Tensor w, float eps, Tensor out) override;
  void add_rmsnorm(Tensor residual, Tensor x, Tensor w, float eps, Tensor out) override;
  void add(Tensor inout, Tensor x) override;
  void linear(Tensor x, Tensor w, Tensor out) override;
  void qk_norm_rope_kv(Tensor qkv, int num_q_heads, int num_kv_heads, Tensor q_norm_w, Tensor k_norm_w,
                       float eps, const RopeConfig& rope, const AttentionMeta& meta, KvCacheLayer cache,
                       Tensor q_out) override;
  void attention(Tensor q, int num_q_heads, int num_kv_heads, float scale, KvCacheLayer cache,
                 const AttentionMeta& meta, Tensor out) override;
  void qk_norm_rope_attention(Tensor qkv, int num_q_heads, int num_kv_heads, Tensor q_norm_w, Tensor k_norm_w,
                              float eps, const RopeConfig& rope, float scale, const AttentionMeta& meta,
                              KvCacheLayer cache, Tensor q, Tensor out) override;
  void qk_norm_rope_attention_linear(Tensor qkv, int num_q_heads, int num_kv_heads, Tensor q_norm_w,
                                     Tensor k_norm_w, float eps, const RopeConfig& rope, float scale,
                                     const AttentionMeta& meta, KvCacheLayer cache, Tensor q, Tensor attn,
                                     Tensor o_proj_w, Tensor out) override;
  void topk_gating(Tensor router_logits, int k, bool renormalize, Tensor weights, Tensor ids) override;
  void add_rmsnorm_route(Tensor residual, Tensor x, Tensor norm_w, float eps, Tensor normed, Tensor router_w,
                         Tensor logits, int k, bool renormalize, Tensor weights, Tensor ids) override;
  void moe_experts(Tensor x, Tensor gate_up, Tensor down, Tensor topk_ids, Tensor topk_weights,
                   int expert_begin, Tensor out) override;
  void moe_pack(Tensor x, Tensor topk_ids, int experts_per_rank, Tensor send_x, Tensor send_expert,
                Tensor origin) override;
  void moe_experts_add_rmsnorm(Tensor x, Tensor gate_up, Tensor down, Tensor topk_ids, Tensor topk_weights,
                               int expert_begin, Tensor out, Tensor residual, Tensor norm_w, float eps,
                               Tensor normed) override;
  void moe_experts_rows(Tensor rows, Tensor expert_ids, Tensor gate_up, Tensor down, Tensor out) override;
  void moe_combine(Tensor results, Tensor origin, Tensor topk_weights, Tensor out) override;
  void silu_mul(Tensor gate_up, Tensor out) override;
  void gather_rows(Tensor x, Tensor rows, Tensor out) override;
  void sampling_candidates(Tensor logits, int64_t vocab_begin, Tensor temperature, Tensor values, Tensor ids,
                           Tensor stats) override;
  void adjust_logits(Tensor logits, int64_t vocab_begin, Tensor targets, Tensor values) override;
  void mask_logits(Tensor logits, int64_t vocab_begin, Tensor rows, Tensor masks) override;
  void sample(Tensor values, Tensor ids, Tensor stats, const SamplingInputs& params, Tensor tokens) override;
  void verify_and_sample(Tensor values, Tensor ids, Tensor stats, const SamplingInputs& params,
                         Tensor row_tokens, Tensor group_start, Tensor emitted, Tensor accepted) override;
  void resolve_tokens(Tensor ids, Tensor table) override;
  void add_i32(Tensor a, Tensor b, int32_t c, Tensor out) override;
  void scatter_i32(Tensor values, Tensor index, Tensor table) override;
  void draft_step_meta(Tensor positions, Tensor block_tables, int block_size, Tensor slot_mapping,
                       Tensor context_lens) override;
  std::unique_ptr<StepGraph> capture(const std::function<void()>& body) override;
  std::string launch_report() const override;

  kernels::SampleParams sample_params(Tensor values, Tensor ids, Tensor stats, const SamplingInputs& params,
                                      Tensor tokens, const char* op) const;

  // Arena bytes not yet handed out: what the engine can give the KV cache.
  std::optional<size_t> memory_left() const override;
  const kernels::LaunchPolicy& launch_policy() const { return *policy_; }
  // How linear() launches the GEMV (staged_sms = 0 where CudaKernelSwitches::staged_gemv is off).
  const kernels::GemvLaunchOptions& gemv_launch_options() const { return gemv_options_; }
  // GEMV launches that triggered their dependent before their wait
  // (runtime.norm_next_gemv_trigger_early_max_rows; the staged kernel's, where the shape takes it), for
  // tests.
  uint64_t gemv_early_trigger_launches() const { return gemv_early_trigger_launches_; }
  // O projections launched to merge attention's ranges themselves (runtime.attention_merge_in_o_max_ranges;
  // whether a step's context then has few enough ranges is the GPU's decision), for tests.
  uint64_t gemv_attention_merge_launches() const { return gemv_attention_merge_launches_; }
  cudaStream_t stream() const { return stream_; }
  int device_index() const { return device_; }
  int num_sms() const { return num_sms_; }
  // Called about every millisecond while the host waits for the stream (copy_to_host, synchronize), so that
  // a wait on a collective whose peer failed ends: the hook throws (e.g. NCCL's asynchronous error check).
  void set_wait_hook(std::function<void()> hook) { wait_hook_ = std::move(hook); }

 private:
  // Paged attention's checks and parameters, q and the prologue left unset (attention and
  // qk_norm_rope_attention); then its split plan, partial buffers and launch for `tokens` query rows.
  kernels::PagedAttentionParams attention_params(int num_q_heads, int num_kv_heads, float scale,
                                                 const KvCacheLayer& cache, const AttentionMeta& meta,
                                                 Tensor out, const char* op) const;
  // Launches attention; with defer_merge_max_ranges > 0 (PagedAttentionParams::defer_merge_max_ranges), the
  // partials the next launch merges where the plan has several ranges, else none (out == nullptr).
  kernels::AttentionPartials launch_attention(kernels::PagedAttentionParams& p, const AttentionMeta& meta,
                                              int tokens, int defer_merge_max_ranges = 0);
  // qk_norm_rope_attention, leaving ranges unmerged as launch_attention does where the step takes the folded
  // launch; the two ops (attention merging) otherwise.
  kernels::AttentionPartials qk_norm_rope_attention_deferring(Tensor qkv, int num_q_heads, int num_kv_heads,
                                                              Tensor q_norm_w, Tensor k_norm_w, float eps,
                                                              const RopeConfig& rope, float scale,
                                                              const AttentionMeta& meta, KvCacheLayer cache,
                                                              Tensor q, Tensor out,
                                                              int defer_merge_max_ranges);
  // linear() with x given as attention's unmerged partials (GemvParams::x_partials) where partials is set.
  void linear_from(Tensor x, Tensor w, Tensor out, const kernels::AttentionPartials* partials);
  // The GEMV options linear() launches m rows of w with (the O projection's where it follows attention), or
  // nullptr where cuBLASLt takes them.
  const kernels::GemvLaunchOptions* linear_gemv_options(int64_t m, Tensor w, bool after_attention) const;
  // The GEMV linear(x, w, ...) would launch right after an attention launch, and whether it can merge
  // attention's partials (kernels::gemv_merges_attention_partials).
  bool linear_after_attention_merges(Tensor x, Tensor w) const;
  // The MoE expert kernels' options from CudaBackendOptions (early down loads, staging, the L2 hint, bulk
  // gate_up and its stages for a launch of `tokens` tokens or rows).
  void set_moe_kernel_options(kernels::MoeExpertsParams& e, int tokens) const;
  struct MoeShape {
    int hidden = 0, tokens = 0, k = 0, experts = 0, inter = 0;
  };
  MoeShape moe_shape(Tensor x, Tensor gate_up, Tensor down, Tensor topk_ids, Tensor topk_weights, Tensor out,
                     const char* op) const;
  // Launches the expert kernels for tokens [t0, t0 + n) (outputs in `scratch`); returns their combine's
  // inputs (out not set).
  kernels::MoeCombineParams launch_moe_chunk(Tensor x, Tensor gate_up, Tensor down, Tensor topk_ids,
                                             Tensor topk_weights, int expert_begin, const MoeShape& s, int t0,
                                             int n, ScratchRegion::Cursor& scratch);

  int device_ = 0;
  int num_sms_ = 0;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<kernels::LaunchPolicy> policy_;
  std::unique_ptr<DeviceArena> arena_;
  std::unique_ptr<ScratchRegion> scratch_;
  std::unique_ptr<CublasLtGemm> gemm_;
  // Arrival counters of split decode attention: allocated and zeroed once, left zero by every launch.
  int32_t* attention_split_counters_ = nullptr;
  // Split decode attention blocks an SM holds at once, at head_dim 32, 64 and 128 (the step plans one wave),
  // each at its head_dim_slot.
  int attention_blocks_per_sm_[3] = {};
  static int head_dim_slot(int head_dim) { return head_dim == 32 ? 0 : head_dim == 64 ? 1 : 2; }
  kernels::GemvLaunchOptions gemv_options_;  // staged_sms = 0 where staging is off
  // The options of the staged GEMV that follows an attention launch (the O projection:
  // runtime.attention_next_gemv_copy_groups, up to attention_next_gemv_max_rows rows), and whether linear()
  // follows one: set by every attention launch (prefill and verification too), cleared by the next linear().
  // Only the order of the weight copies depends on it, never a result.
  kernels::GemvLaunchOptions gemv_after_attention_options_;
  bool gemv_follows_attention_ = false;
  // The policy's launch count right after the last RMSNorm launch (rmsnorm, add_rmsnorm, the MoE combine's
  // norm). A linear() that finds the count unchanged follows that norm directly and, up to
  // runtime.norm_next_gemv_trigger_early_max_rows rows, its staged GEMV triggers its dependent before its own
  // wait (GemvLaunchOptions::staged_trigger_before_wait): its dependent may start while the norm runs, and
  // none reads what a norm writes before its own wait (kernels/pdl.cuh). An op between them (a gather, an
  // attention launch) moves the count: then the GEMV keeps the usual trigger.
  uint64_t norm_launch_count_ = ~uint64_t{0};
  uint64_t gemv_early_trigger_launches_ = 0;
  uint64_t gemv_attention_merge_launches_ = 0;
  const CudaBackendOptions options_;  // the kernel switches are read from here
  // moe_identity_[i] = i: the MoE kernels' assignment list when one token runs without moe_align.
  static constexpr int kMoeIdentityEntries = 64;
  int32_t* moe_identity_ = nullptr;
  size_t staged_smem_limit_ = 0;         // the device's opt-in shared memory a block
  bool router_fused_available_ = false;  // kernels/router_fused.h on this device
  bool gate_up_bulk_available_ = false;  // MoeExpertsParams::gate_up_bulk on this device
  int attention_split_counter_capacity_ = 0;
  char* h2d_staging_ = nullptr;  // two halves, each guarded by an event
  char* d2h_staging_ = nullptr;
  size_t staging_bytes_ = 0;
  cudaEvent_t h2d_done_[2] = {nullptr, nullptr};
  int h2d_next_ = 0;
  cudaEvent_t stream_idle_ = nullptr;
  std::function<void()> wait_hook_;

  // Waits until everything enqueued on the stream has finished, calling the wait hook while it waits.
  void wait_for_stream();
  // After an RMSNorm launch: norm_launch_count_ = the policy's launch count.
  void note_norm_launch();
};

std::unique_ptr<CudaBackend> make_cuda_backend(const CudaBackendOptions& options);

// Number of CUDA devices, or 0 (with the reason in *why) when the runtime or driver cannot see any.
int cuda_device_count(std::string* why = nullptr);

// Device memory kept free outside the arena for what is allocated beside it: CUDA graphs (logged at
// capture), NCCL's communicator buffers, cuBLASLt, the CUDA context's own growth.
inline constexpr size_t kOutsideArenaBytes = size_t(1) << 30;

// The arena for gpu_memory_fraction of a device of `total` bytes, `free` of them free: the fraction's share
// less what is already in use, and at most free - kOutsideArenaBytes (a fraction near 1 would leave nothing
// for the allocations outside it, which then fail with an out-of-memory error that names no setting).
// Throws, naming the setting, where that leaves no arena.
size_t arena_bytes_for_fraction(double fraction, size_t total, size_t free);

}  // namespace tpserve
