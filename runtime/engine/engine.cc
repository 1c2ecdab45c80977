#include "runtime/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "common/log.h"
#include "runtime/engine/step_codec.h"

namespace tpserve {
namespace {

enum class Message : int64_t { kStep = 1, kStepWithLogits = 2, kStop = 3 };

ShardLayout make_layout(const ParallelConfig& p, int rank, int size) {
  ShardLayout l;
  l.tp_rank = rank, l.tp_size = size;
  l.expert_parallel = p.moe_parallel == MoeParallel::kEp && p.ep > 1;
  l.ep_rank = l.expert_parallel ? rank : 0;
  l.ep_size = l.expert_parallel ? p.ep : 1;
  l.all_to_all = l.expert_parallel && p.moe_dispatch == MoeDispatch::kAllToAll;
  return l;
}

}  // namespace

Engine::Engine(const Config& config, parallel::Communicator& control, parallel::Communicator& data,
               std::unique_ptr<Backend> backend, const EngineOptions& options)
    : config_(config),
      comm_(control),
      data_(data),
      backend_(std::move(backend)),
      source_(open_model_source(config.model)) {
  TPS_CHECK(control.size() == data.size() && control.rank() == data.rank(),
            "control and data communicators disagree on the group");
  validate_layout(config_, comm_.size(), layout_facts(source_.spec));
  if (comm_.rank() == 0 && config_.runtime.max_seq_len > source_.spec.max_position_embeddings)
    log_warn("runtime.max_seq_len ", config_.runtime.max_seq_len,
             " is beyond the model's max_position_embeddings ", source_.spec.max_position_embeddings,
             ": positions past it are outside what the model was trained on "
             "(no RoPE scaling is applied)");
  const ShardLayout layout = make_layout(config_.parallel, comm_.rank(), comm_.size());
  const bool mtp = config_.speculative.method == SpeculativeMethod::kMtp;
  ModelWeights weights = load_model_weights(source_.spec, layout, *source_.weights, *backend_, mtp);
  // The backend holds its own copy: the checkpoint's mappings go (they counted in the process's memory, and
  // a shard changed on disk while serving could fault a mapped page).
  source_.weights.reset();

  const auto& rt = config_.runtime;
  const int k = mtp ? config_.speculative.num_speculative_tokens : options.draft_script_tokens;
  TPS_CHECK(!mtp || !options.draft_script, "scripted drafts replace MTP drafting: use one of them");
  ModelOptions mo;
  mo.num_speculative_tokens = k;
  mo.kv_block_size = rt.kv_block_size;
  // Speculation looks 2k tokens ahead (verified rows + MTP draft steps).
  mo.max_blocks_per_seq = (rt.max_seq_len + 2 * k + rt.kv_block_size - 1) / rt.kv_block_size;
  mo.num_kv_blocks = rt.num_kv_blocks;  // 0: the model sizes it from memory, up to the cap
  mo.max_seqs = rt.max_batch;
  mo.max_tokens = std::max(rt.max_num_batched_tokens, rt.max_batch * (1 + k));
  mo.max_samples = rt.max_batch * (1 + k);
  mo.sampling_candidates = rt.sampling_candidates;
  // Logit adjustments a step may carry (20 bytes each): any one request's most (a penalised sequence's
  // every token and a full logit_bias, or the 1 + k verified rows of a biased one: HTTP allows 1024 bias
  // tokens, and a few stop tokens), plus 256 a sequence; more wait for a later step.
  mo.max_logit_adjustments = rt.max_seq_len + 2048 * (1 + k) + 256 * rt.max_batch;
  // Token masks (structured output): a constrained sequence samples one row a step (it is not speculated).
  mo.max_token_masks = rt.max_batch;
  mo.keep_logits = options.keep_logits;
  mo.record_routing = options.record_routing;
  model_ = std::make_unique<Qwen3MoeModel>(source_.spec, layout, std::move(weights), mo, *backend_, data_);
  // Ranks finish loading at different times (seconds apart): the first forward (graph warm-up or first step)
  // starts together, so that collectives that wait on their peers (the one-shot all-reduce's 20 s limit) do
  // not count another rank's loading.
  comm_.barrier();

  if (const char* fault = std::getenv("TPSERVE_FAULT_INJECT")) {
    TPS_CHECK(std::sscanf(fault, "rank:%d,step:%ld", &fault_rank_, &fault_step_) == 2,
              "TPSERVE_FAULT_INJECT='", fault, "': expected rank:R,step:N");
    log_warn("fault injection armed: rank ", fault_rank_, " throws at step ", fault_step_);
  }

  if (config_.cuda_graph.enabled) {
    std::vector<int> sizes = config_.cuda_graph.capture_sizes;
    if (sizes.empty()) {
      for (int b = 1; b < rt.max_batch; b *= 2) sizes.push_back(b);
      sizes.push_back(rt.max_batch);
    }
    // No graphs on this backend (the CPU): the warm-up below, as without graphs. Capture warmed up each
    // bucket's shape already where it did capture.
    if (!model_->capture_graphs(sizes)) model_->warm_up(rt.max_batch);
  } else {
    model_->warm_up(rt.max_batch);
  }

  if (is_driver()) {
    SchedulerLimits limits{.max_batch = rt.max_batch,
                           .max_step_tokens = mo.max_tokens,
                           .max_seq_len = rt.max_seq_len,
                           .max_blocks_per_seq = mo.max_blocks_per_seq,
                           .max_prefill_step_tokens = rt.max_num_batched_tokens,
                           .prefix_caching = rt.enable_prefix_caching,
                           .max_logprobs = std::min(20, model_->sampling_candidates()),
                           .max_logit_adjustments = mo.max_logit_adjustments,
                           .vocab_size = source_.spec.vocab_size};
    std::vector<int32_t> eos = source_.generation.eos_token_ids;
    if (eos.empty()) eos = source_.spec.eos_token_ids;
    SpeculativeSettings speculative;
    speculative.num_tokens = k;
    if (mtp) {
      Qwen3MoeModel* model = model_.get();
      speculative.device_draft = [model](int slot, int j) { return model->device_draft_token(slot, j); };
    }
    speculative.script = options.draft_script;
    scheduler_ = std::make_unique<Scheduler>(limits, model_->options().num_kv_blocks, mo.kv_block_size, eos,
                                             speculative);
  }
}

Engine::~Engine() = default;

Scheduler& Engine::scheduler() {
  TPS_CHECK(scheduler_ != nullptr, "only rank 0 schedules");
  return *scheduler_;
}

void Engine::broadcast_step(const StepBatch* batch, bool want_logits) {
  if (batch != nullptr) stopped_ = false;  // followers serve this step, so a later stop must reach them
  if (comm_.size() == 1) return;
  std::vector<char> payload = batch ? encode_step(*batch) : std::vector<char>();
  int64_t header[2] = {static_cast<int64_t>(batch == nullptr ? Message::kStop
                                            : want_logits    ? Message::kStepWithLogits
                                                             : Message::kStep),
                       static_cast<int64_t>(payload.size())};
  comm_.broadcast(header, sizeof(header), 0);
  if (!payload.empty()) comm_.broadcast(payload.data(), payload.size(), 0);
}

StepResult Engine::forward(const StepBatch& batch, bool want_logits) {
  ++steps_;
  if (comm_.rank() == fault_rank_ && steps_ == fault_step_)
    TPS_THROW("injected fault (TPSERVE_FAULT_INJECT) on rank ", fault_rank_, " at step ", fault_step_);
  return model_->forward(batch, want_logits);
}

StepResult Engine::run_batch(const StepBatch& batch, bool want_logits) {
  // The batch writes KV blocks of its own choosing: what the prefix cache knew of them no longer holds.
  scheduler().reset_prefix_cache();
  broadcast_step(&batch, want_logits);
  return forward(batch, want_logits);
}

std::vector<TokenEvent> Engine::step(std::vector<float>* logits) {
  if (logits != nullptr) logits->clear();  // an idle step leaves none
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const auto t0 = Clock::now();
  auto batch = scheduler().schedule();
  std::vector<TokenEvent> events = scheduler_->take_aborted();
  last_step_stats_ = {};
  if (!batch) return events;
  const StepMix& mix = scheduler_->last_step_mix();
  last_step_stats_ = {.tokens = batch->num_tokens(),
                      .sequences = batch->num_seqs(),
                      .samples = batch->num_samples(),
                      .decode_seqs = mix.decode_seqs,
                      .prefill_seqs = mix.prefill_seqs,
                      .prefill_tokens = mix.prefill_tokens,
                      .context_tokens = 0};
  for (int32_t n : batch->context_lens) last_step_stats_.context_tokens += n;
  const auto t1 = Clock::now();
  const bool want_logits = logits != nullptr;
  broadcast_step(&*batch, want_logits);
  const auto t2 = Clock::now();
  StepResult result = forward(*batch, want_logits);
  if (want_logits) *logits = std::move(result.logits);
  const auto t3 = Clock::now();
  auto emitted = scheduler_->complete(result);
  events.insert(events.end(), emitted.begin(), emitted.end());
  StepStats& s = last_step_stats_;
  s.schedule_s = seconds(t1 - t0);
  s.broadcast_s = seconds(t2 - t1);
  s.enqueue_s = model_->last_enqueue_seconds();
  s.wait_s = std::max(0.0, seconds(t3 - t2) - s.enqueue_s);
  s.complete_s = seconds(Clock::now() - t3);
  return events;
}

void Engine::stop_followers() {
  if (stopped_ || !is_driver()) return;
  stopped_ = true;
  broadcast_step(nullptr, false);
}

void Engine::run_follower() {
  TPS_CHECK(!is_driver(), "rank 0 drives; it does not follow");
  for (;;) {
    int64_t header[2] = {0, 0};
    comm_.broadcast(header, sizeof(header), 0);
    const auto kind = static_cast<Message>(header[0]);
    if (kind == Message::kStop) return;
    TPS_CHECK(kind == Message::kStep || kind == Message::kStepWithLogits, "control plane: unknown message ",
              header[0]);
    TPS_CHECK(header[1] > 0 && header[1] < (int64_t(1) << 32), "control plane: step of ", header[1],
              " bytes");
    std::vector<char> payload(static_cast<size_t>(header[1]));
    comm_.broadcast(payload.data(), payload.size(), 0);
    forward(decode_step(payload), kind == Message::kStepWithLogits);
  }
}

std::vector<int32_t> Engine::generate(const std::vector<int32_t>& prompt, const SamplingParams& sampling,
                                      int max_tokens, bool ignore_eos) {
  Request r;
  r.prompt = prompt;
  r.sampling = sampling;
  r.max_tokens = max_tokens;
  r.ignore_eos = ignore_eos;
  return std::move(generate_together({std::move(r)}).front());
}

std::vector<std::vector<int32_t>> Engine::generate_together(std::vector<Request> requests) {
  const int64_t first_id = next_request_id_;
  for (Request& r : requests) {
    r.id = next_request_id_++;
    scheduler().add(std::move(r));
  }
  std::vector<std::vector<int32_t>> out(requests.size());
  while (scheduler_->has_work())
    for (const auto& e : step())
      if (e.token >= 0 && e.request_id >= first_id && e.request_id < next_request_id_)
        out[e.request_id - first_id].push_back(e.token);
  return out;
}

}  // namespace tpserve
