// Embedding lookup: one block per token copies its row in 16-byte vectors (or writes zeros).
#include "kernels/device_common.cuh"
#include "kernels/embedding.h"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"

namespace tpserve::kernels {
namespace {

__global__ void embedding_kernel(const EmbeddingParams p) {
  pdl_wait_then_trigger();
  const int token = blockIdx.x;
  const int64_t row = static_cast<int64_t>(p.ids[token]) - p.vocab_begin;
  const bool held = row >= 0 && row < p.vocab_rows;
  const int vectors = p.hidden / kBf16PerVec;
  const bf16* src = p.table + (held ? row : 0) * p.hidden;
  bf16* dst = p.out + static_cast<int64_t>(token) * p.hidden;
  for (int v = threadIdx.x; v < vectors; v += blockDim.x)
    store_vec(dst + v * kBf16PerVec, held ? load_vec(src + v * kBf16PerVec) : make_uint4(0, 0, 0, 0));
}

}  // namespace

void launch_embedding(const EmbeddingParams& p, cudaStream_t stream, const LaunchPolicy& policy) {
  const int vectors = p.hidden / kBf16PerVec;
  const int threads = vectors >= 256 ? 256 : ((vectors + kWarpSize - 1) / kWarpSize) * kWarpSize;
  launch(policy, Site::kEmbedding, Pdl::kEnrolled, embedding_kernel, dim3(p.tokens), dim3(threads), 0, stream,
         p);
}

}  // namespace tpserve::kernels
