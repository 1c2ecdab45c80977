// One shape's device buffers (in the CUDA backend's arena) and the routing chain enqueued from them:
//   per layer l:  logits_l = x_l W_l^T        router GEMM: CudaBackend::linear (GEMV up to 16 tokens,
//   cuBLASLt
//                                             above, as the model runs it), launched through kernels/launch.h
//                 ids_l, w_l = topk(logits_l) top-k gating: CudaBackend::topk_gating (renormalised), launch.h
//                 x_{l+1} = consumer(x_l, ids_l, w_l)    the consumer, launched as the LaunchMode says
// Each layer has its own router weights and expert table ([E, H] bf16 each), so that a 48-layer chain reads
// them from HBM rather than L2, as a model does. x_0 and the weights are random (seeded); the chain is
// deterministic, so every mode must produce the same x_L bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/op_chain/chain_options.h"
#include "runtime/backend/cuda/cuda_backend.h"

namespace tpserve::bench {

class ChainBuffers {
 public:
  ChainBuffers(CudaBackend& backend, const ChainShape& shape, int max_tokens, uint64_t seed);

  const ChainShape& shape() const { return shape_; }
  // Enqueues every layer's chain for `tokens` (<= max_tokens) tokens on the backend's stream. Capturable.
  void enqueue(int tokens, LaunchMode mode);
  // x_L of the first `tokens` tokens as raw bf16 bits (copies to the host: waits for the stream).
  std::vector<uint16_t> read_output(int tokens);
  // "gemv" or "cublaslt": the path CudaBackend::linear takes for `tokens` rows.
  static const char* router_gemm_path(int tokens);

 private:
  CudaBackend& be_;
  ChainShape shape_;
  int max_tokens_;
  std::vector<Tensor> router_, table_;           // per layer [E, H] bf16
  std::vector<Tensor> states_;                   // L + 1 of [max_tokens, H] bf16
  std::vector<Tensor> logits_;                   // per layer [max_tokens, E] f32
  std::vector<Tensor> gate_weights_, gate_ids_;  // per layer [max_tokens, k] f32 / i32
};

}  // namespace tpserve::bench
