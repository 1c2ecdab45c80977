// Buffers of one shape, filled once with seeded random bf16 (bench/bench_kernels.h), and the chain.
#include "bench/op_chain/chain_buffers.h"

#include "bench/bench_kernels.h"
#include "bench/op_chain/consumer_kernel.h"
#include "kernels/topk_gating.h"

namespace tpserve::bench {

static_assert(kMaxChainExperts == kernels::kGatingMaxExperts && kMaxChainTopK == kernels::kGatingMaxK,
              "op_chain's shape limits must be top-k gating's");

ChainBuffers::ChainBuffers(CudaBackend& backend, const ChainShape& shape, int max_tokens, uint64_t seed)
    : be_(backend), shape_(shape), max_tokens_(max_tokens) {
  const int64_t E = shape.experts, H = shape.hidden, K = shape.top_k, T = max_tokens;
  const kernels::LaunchPolicy& policy = be_.launch_policy();
  uint64_t next_seed = seed * 1000003;
  auto random_bf16 = [&](std::initializer_list<int64_t> dims) {
    Tensor t = be_.alloc(DType::kBF16, dims);
    launch_fill_bf16(policy, be_.stream(), t.data, t.nbytes(), ++next_seed);
    return t;
  };
  for (int l = 0; l < shape.layers; ++l) {
    router_.push_back(random_bf16({E, H}));
    table_.push_back(random_bf16({E, H}));
    logits_.push_back(be_.alloc(DType::kF32, {T, E}));
    gate_weights_.push_back(be_.alloc(DType::kF32, {T, K}));
    gate_ids_.push_back(be_.alloc(DType::kI32, {T, K}));
  }
  states_.push_back(random_bf16({T, H}));
  for (int l = 0; l < shape.layers; ++l) states_.push_back(be_.alloc(DType::kBF16, {T, H}));
  be_.synchronize();
}

void ChainBuffers::enqueue(int tokens, LaunchMode mode) {
  TPS_CHECK(tokens >= 1 && tokens <= max_tokens_, "op_chain: ", tokens, " tokens, buffers for ", max_tokens_);
  for (int l = 0; l < shape_.layers; ++l) {
    const Tensor x = states_[l].rows(0, tokens), logits = logits_[l].rows(0, tokens);
    const Tensor weights = gate_weights_[l].rows(0, tokens), ids = gate_ids_[l].rows(0, tokens);
    be_.linear(x, router_[l], logits);
    be_.topk_gating(logits, shape_.top_k, /*renormalize=*/true, weights, ids);
    ConsumerParams p;
    p.x = static_cast<const kernels::bf16*>(x.data);
    p.table = static_cast<const kernels::bf16*>(table_[l].data);
    p.weights = weights.ptr<float>();
    p.ids = ids.ptr<int32_t>();
    p.out = static_cast<kernels::bf16*>(states_[l + 1].data);
    p.tokens = tokens;
    p.experts = shape_.experts;
    p.k = shape_.top_k;
    p.hidden = shape_.hidden;
    launch_consumer(p, mode, be_.stream());
  }
}

std::vector<uint16_t> ChainBuffers::read_output(int tokens) {
  const Tensor out = states_.back().rows(0, tokens);
  std::vector<uint16_t> host(static_cast<size_t>(out.numel()));
  be_.copy_to_host(host.data(), out);
  return host;
}

const char* ChainBuffers::router_gemm_path(int tokens) {
  return tokens <= kLinearGemvMaxRows ? "gemv" : "cublaslt";
}

}  // namespace tpserve::bench
