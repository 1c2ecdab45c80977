// CUDA graphs for decode steps. A decode step (every sequence q rows: its last token, plus k drafts under
// speculation; every row sampled) is padded to the next captured batch size and replayed as one graph.
// Padding sequences hold token 0 at positions 0..q-1, write their KV (and MTP drafts' KV) into the extra
// padding block, draw greedily, and keep their drafts in the draft table's trash entry; nothing real reads
// them. A block smaller than q + 2k keeps them inside it too: their slots wrap around the block, and every
// block-table entry they can reach is the padding block (upload fills unused entries with it). Shapes inside
// the graph are the bucket's, so every replay of a bucket does identical work.
#include <algorithm>

#include "common/log.h"
#include "runtime/model/qwen3_moe.h"

namespace tpserve {

int Qwen3MoeModel::graph_bucket(const StepBatch& b) const {
  // Log-probabilities, logit adjustments and token masks: eager.
  if (graphs_.empty() || !b.logprobs.empty() || !b.logit_adjustments.empty() || !b.mask_rows.empty())
    return -1;
  const int seqs = b.num_seqs(), q = 1 + options_.num_speculative_tokens;
  const bool speculative = !b.group_start.empty();
  if (speculative != (options_.num_speculative_tokens > 0)) return -1;
  if (b.num_tokens() != seqs * q || b.num_samples() != b.num_tokens()) return -1;  // prefill or mixed step
  if (speculative && b.num_groups() != seqs) return -1;
  for (int i = 0; i <= seqs; ++i)
    if (b.query_start[i] != i * q) return -1;
  const bool mtp = !b.mtp_next_tokens.empty();
  if (mtp != weights_.mtp.present && options_.num_speculative_tokens > 0) return -1;
  auto it = graphs_.lower_bound(seqs);
  return it == graphs_.end() ? -1 : it->first;
}

StepBatch Qwen3MoeModel::pad_to(const StepBatch& batch, int size) const {
  StepBatch b = batch;
  const int q = 1 + options_.num_speculative_tokens, bs = options_.kv_block_size;
  const int pad_block = options_.num_kv_blocks;
  const bool speculative = !b.group_start.empty(), mtp = !b.mtp_next_tokens.empty();
  const int width = std::max(b.max_blocks_per_seq, 1);
  if (b.max_blocks_per_seq == 0) b.block_tables.clear();
  b.max_blocks_per_seq = width;
  for (int s = b.num_seqs(); s < size; ++s) {
    for (int j = 0; j < q; ++j) {
      const int row = b.num_tokens();
      b.token_ids.push_back(0);
      b.positions.push_back(j);
      b.slot_mapping.push_back(pad_block * bs + j % bs);  // rows past a small block share its slots
      b.sample_rows.push_back(row);
      b.sampling.push_back(SamplingParams{});
      b.sample_counters.push_back(j + 1);
      if (mtp) b.mtp_next_tokens.push_back(-static_cast<int32_t>(b.sample_rows.size()));
    }
    b.query_start.push_back(static_cast<int32_t>(b.token_ids.size()));
    b.context_lens.push_back(q);
    b.block_tables.insert(b.block_tables.end(), width, pad_block);
    if (speculative) b.group_start.push_back(static_cast<int32_t>(b.sample_rows.size()));
    if (mtp) {
      b.draft_slot.push_back(-1);
      b.group_seq.push_back(s);
    }
  }
  return b;
}

StepBatch Qwen3MoeModel::padding_batch(int size) const {
  StepBatch empty;
  empty.query_start = {0};
  if (options_.num_speculative_tokens > 0) empty.group_start = {0};
  StepBatch b = pad_to(empty, size);
  if (weights_.mtp.present && options_.num_speculative_tokens > 0 && b.mtp_next_tokens.empty()) {
    // pad_to only extends MTP inputs that exist: build them for an all-padding batch.
    for (int r = 0; r < b.num_tokens(); ++r) b.mtp_next_tokens.push_back(-(r + 1));
    b.draft_slot.assign(size, -1);
    for (int s = 0; s < size; ++s) b.group_seq.push_back(s);
  }
  return b;
}

Qwen3MoeModel::StepShape Qwen3MoeModel::run_padding_step(int size) {
  StepShape shape = upload(padding_batch(size));
  // A graph's attention covers any context the sequences can reach (empty splits exit at once).
  shape.max_context_len = options_.max_blocks_per_seq * options_.kv_block_size;
  compute(shape);
  backend_.synchronize();
  return shape;
}

void Qwen3MoeModel::warm_up(int batch_size) {
  TPS_CHECK(batch_size >= 1 && batch_size <= options_.max_seqs, "warm-up batch size ", batch_size,
            " outside [1, max_batch=", options_.max_seqs, "]");
  run_padding_step(batch_size);
}

bool Qwen3MoeModel::capture_graphs(std::vector<int> batch_sizes) {
  std::sort(batch_sizes.begin(), batch_sizes.end());
  batch_sizes.erase(std::unique(batch_sizes.begin(), batch_sizes.end()), batch_sizes.end());
  for (int size : batch_sizes) {
    TPS_CHECK(size >= 1 && size <= options_.max_seqs, "graph batch size ", size,
              " outside [1, max_batch=", options_.max_seqs, "]");
    // Warm-up: first-use queries and plans happen outside the capture.
    const StepShape shape = run_padding_step(size);
    auto graph = backend_.capture([&] { compute(shape); });
    if (graph == nullptr) {
      log_info(backend_.name(), " backend: no CUDA graphs, decode steps run eagerly");
      return false;
    }
    log_info("captured decode graph for batch ", size, ": ", graph->report().format());
    graphs_[size] = std::move(graph);
  }
  return true;
}

std::vector<std::pair<int, GraphReport>> Qwen3MoeModel::graph_reports() const {
  std::vector<std::pair<int, GraphReport>> out;
  for (const auto& [size, graph] : graphs_) out.emplace_back(size, graph->report());
  return out;
}

}  // namespace tpserve
