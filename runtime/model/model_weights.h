// ModelWeights: one rank's shard of a Qwen3-MoE model in backend memory, loaded slice by slice from a
// WeightSource (checkpoint or synthetic) after checking every tensor's shape against the ModelSpec.
#pragma once

#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/model/shard_layout.h"
#include "runtime/weights/weight_source.h"

namespace tpserve {

struct LayerWeights {
  Tensor input_norm;  // [H]
  Tensor qkv;         // [(Hq_local + 2 Hkv_local) * D, H]: q rows, then k, then v
  Tensor q_norm;      // [D]
  Tensor k_norm;      // [D]
  Tensor o_proj;      // [H, Hq_local * D] (row-parallel: partial sums)
  Tensor post_norm;   // [H]
  bool moe = false;
  Tensor router;   // [E, H] (every rank holds the whole router)
  Tensor gate_up;  // MoE: [E_local, 2 I_local, H]; dense: [2 I_local, H]
  Tensor down;     // MoE: [E_local, H, I_local]; dense: [H, I_local]
};

struct MtpWeights {
  bool present = false;
  Tensor fc_embedding;    // [H, H]: mtp.fc columns [0, H) (applied to the normed embedding)
  Tensor fc_hidden;       // [H, H]: mtp.fc columns [H, 2H) (applied to the normed hidden state)
  Tensor norm_embedding;  // [H]
  Tensor norm_hidden;     // [H]
  LayerWeights layer;
  Tensor final_norm;  // [H]
};

struct ModelWeights {
  Tensor embed;  // [V_local, H]
  std::vector<LayerWeights> layers;
  Tensor final_norm;  // [H]
  Tensor lm_head;     // [V_local, H] (the embedding when tied)
  MtpWeights mtp;
  size_t bytes = 0;  // resident weight bytes on this rank
};

ModelWeights load_model_weights(const ModelSpec& spec, const ShardLayout& layout, const WeightSource& source,
                                Backend& backend, bool load_mtp);

}  // namespace tpserve
