// Engine: one rank's model plus, on rank 0 (the driver), the scheduler. Every step the driver schedules,
// broadcasts the plan over the control communicator (host memory), and all ranks run the same forward in
// lockstep, their collectives on the data communicator (the backend's memory: MPI on the CPU, NCCL on
// GPUs); followers loop in run_follower() until the driver stops them. The engine knows no CUDA and no MPI.
#pragma once

#include <memory>
#include <optional>

#include "parallel/communicator.h"
#include "runtime/backend/backend.h"
#include "runtime/config/config.h"
#include "runtime/engine/model_source.h"
#include "runtime/engine/scheduler.h"
#include "runtime/model/qwen3_moe.h"

namespace tpserve {

struct EngineOptions {
  bool keep_logits = false;     // tests: StepResult::logits (on every rank: followers gather them too)
  bool record_routing = false;  // benchmarks: model().last_step_routing() after each step
  // Tests: speculative decoding with scripted drafts (any model, no MTP head needed), k drafts per step.
  DraftScript draft_script;
  int draft_script_tokens = 0;
};

// What the driver's last step() ran (benchmarks tell decode-only steps from those with prefill).
struct StepStats {
  int tokens = 0;  // rows of the forward (decode rows + prefill chunk tokens)
  int sequences = 0;
  int samples = 0;       // rows sampled (tokens emitted)
  int decode_seqs = 0;   // sequences decoding their next token
  int prefill_seqs = 0;  // sequences in prefill (a prompt chunk, or recomputed after preemption)
  int prefill_tokens = 0;
  // Sum over sequences of the tokens cached after the step (the KV the attention reads).
  int64_t context_tokens = 0;
  // Where the driver's wall time of the step went (host clock, seconds): scheduling, sending the plan to the
  // other ranks, the model's host work until the step is enqueued (inputs uploaded, graph launched or kernels
  // launched eagerly), the wait for its results, and completing the requests. All but `wait_s` is host time
  // the device may sit idle in.
  double schedule_s = 0, broadcast_s = 0, enqueue_s = 0, wait_s = 0, complete_s = 0;
  bool has_prefill() const { return prefill_seqs > 0; }
};

class Engine {
 public:
  // Loads this rank's shard (layout from config.parallel and the communicators) on the given backend.
  Engine(const Config& config, parallel::Communicator& control, parallel::Communicator& data,
         std::unique_ptr<Backend> backend, const EngineOptions& options = {});
  // Host-memory backends: one communicator carries both the plan and the collectives.
  Engine(const Config& config, parallel::Communicator& comm, std::unique_ptr<Backend> backend,
         const EngineOptions& options = {})
      : Engine(config, comm, comm, std::move(backend), options) {}
  ~Engine();

  bool is_driver() const { return comm_.rank() == 0; }
  Scheduler& scheduler();

  // Driver: runs one scheduled step on every rank; returns the tokens emitted (empty when idle). Tests:
  // with `logits` (EngineOptions::keep_logits) the step runs eagerly and leaves there the logits of its
  // sampled rows, [samples, vocab].
  std::vector<TokenEvent> step(std::vector<float>* logits = nullptr);
  // Driver: runs a prepared batch on every rank (tests, benchmarks). It forgets the prefix cache: the batch
  // writes KV blocks the scheduler does not know of.
  StepResult run_batch(const StepBatch& batch, bool want_logits = false);
  // Driver: releases the followers (they return from run_follower). A second call does nothing unless the
  // driver ran steps since the first: then the followers are serving again (they called run_follower()
  // anew, as benchmarks do for each round on one engine) and are released again.
  void stop_followers();
  // Followers: executes the driver's steps until stop_followers().
  void run_follower();
  // Driver: what the last step() ran (all zero before the first step and after an idle one).
  const StepStats& last_step_stats() const { return last_step_stats_; }

  // Driver convenience: generates for one prompt to completion.
  std::vector<int32_t> generate(const std::vector<int32_t>& prompt, const SamplingParams& sampling,
                                int max_tokens, bool ignore_eos = false);
  // Driver convenience: runs the requests together to completion (their ids are replaced by fresh ones);
  // the tokens of each, in the order given.
  std::vector<std::vector<int32_t>> generate_together(std::vector<Request> requests);

  const ModelSpec& spec() const { return source_.spec; }
  const ModelSource& source() const { return source_; }
  const Config& config() const { return config_; }
  Qwen3MoeModel& model() { return *model_; }
  Backend& backend() { return *backend_; }

 private:
  void broadcast_step(const StepBatch* batch, bool want_logits);
  StepResult forward(const StepBatch& batch, bool want_logits);

  Config config_;
  parallel::Communicator& comm_;  // control plane
  parallel::Communicator& data_;
  std::unique_ptr<Backend> backend_;
  ModelSource source_;
  std::unique_ptr<Qwen3MoeModel> model_;
  std::unique_ptr<Scheduler> scheduler_;
  int64_t next_request_id_ = 1;
  bool stopped_ = false;
  int64_t steps_ = 0;
  StepStats last_step_stats_;
  // Fault injection for tests (TPSERVE_FAULT_INJECT=rank:R,step:N): throws on rank R at its N-th step.
  int fault_rank_ = -1;
  int64_t fault_step_ = -1;
};

}  // namespace tpserve
