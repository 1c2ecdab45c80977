#include "runtime/model/model_weights.h"

#include <map>
#include <set>

#include "common/log.h"
#include "runtime/model/weight_names.h"
#include "runtime/weights/checkpoint.h"
#include "runtime/weights/load_progress.h"

namespace tpserve {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A slice of one checkpoint tensor: ranges per dimension.
struct Piece {
  std::string name;
  std::vector<Range> ranges;
};

class Loader {
 public:
  // Expert tensors may come per expert or fused, layer by layer: both spellings are expected shapes.
  Loader(const ModelSpec& spec, const WeightSource& source, Backend& backend, uint64_t total_bytes,
         int64_t total_tensors)
      : source_(source),
        backend_(backend),
        dtype_(backend.weight_dtype()),
        progress_("loading " + source.describe(), total_bytes, total_tensors) {
    for (ExpertLayout layout : {ExpertLayout::kPerExpert, ExpertLayout::kFused})
      for (auto& t : expected_tensors(spec, layout)) expected_[t.name] = t.shape;
  }

  // The whole tensor `name`, shape checked.
  Tensor whole(const std::string& name) {
    const auto& shape = checked_shape(name);
    std::vector<Range> ranges;
    for (int64_t d : shape) ranges.push_back({0, d});
    return load(shape_of(ranges), {{name, ranges}});
  }

  // Pieces concatenated along dim 0 into one tensor of `shape` (each piece's slice must be contiguous rows of
  // the result, i.e. the pieces' trailing extents match shape[1:]).
  Tensor load(const std::vector<int64_t>& shape, const std::vector<Piece>& pieces) {
    for (const Piece& p : pieces) checked_shape(p.name);  // before the allocation a wrong config may inflate
    Tensor t = alloc(shape);
    fill(t, pieces);
    return t;
  }

  Tensor alloc(const std::vector<int64_t>& shape) {
    Tensor t;
    switch (shape.size()) {
      case 1:
        t = backend_.alloc(dtype_, {shape[0]});
        break;
      case 2:
        t = backend_.alloc(dtype_, {shape[0], shape[1]});
        break;
      case 3:
        t = backend_.alloc(dtype_, {shape[0], shape[1], shape[2]});
        break;
      default:
        TPS_THROW("weight of rank ", shape.size());
    }
    bytes_ += t.nbytes();
    return t;
  }

  // Reads the pieces one after another into `dst` (contiguous).
  void fill(Tensor dst, const std::vector<Piece>& pieces) {
    size_t total = 0;
    for (const auto& p : pieces) {
      checked_shape(p.name);
      int64_t n = 1;
      for (const auto& r : p.ranges) n *= r.size();
      total += static_cast<size_t>(n) * dtype_size(dtype_);
    }
    TPS_CHECK(total == dst.nbytes(), "weight pieces ", total, " bytes for a tensor of ", dst.nbytes());
    if (fill_in_place(dst, pieces)) {
      progress_.add(total);
      return;
    }
    staging_.resize(total);
    size_t offset = 0;
    for (const auto& p : pieces) {
      source_.read(p.name, p.ranges, dtype_, staging_.data() + offset);
      int64_t n = 1;
      for (const auto& r : p.ranges) n *= r.size();
      offset += static_cast<size_t>(n) * dtype_size(dtype_);
    }
    backend_.copy_from_host(dst, staging_.data());
    progress_.add(total);
  }

  // Generated weights: the backend generates each piece where it lives (no host pass, no copy), when it
  // can. All or nothing: false leaves `dst` to the host path.
  bool fill_in_place(Tensor dst, const std::vector<Piece>& pieces) {
    if (!device_fill_) return false;
    std::vector<SyntheticSlice> slices;
    for (const auto& p : pieces) {
      std::optional<SyntheticSlice> s = source_.synthetic_slice(p.name, p.ranges);
      if (!s) return false;
      slices.push_back(*s);
    }
    size_t offset = 0;
    for (const SyntheticSlice& s : slices) {
      Tensor part(static_cast<char*>(dst.data) + offset, dtype_, dst.device, {s.numel()});
      if (!backend_.fill_synthetic(part, s)) {
        TPS_CHECK(offset == 0, "internal: a backend generated part of a weight only");
        device_fill_ = false;  // this backend cannot: never ask again
        return false;
      }
      offset += part.nbytes();
    }
    return true;
  }

  const std::vector<int64_t>& checked_shape(const std::string& name) {
    auto it = expected_.find(name);
    TPS_CHECK(it != expected_.end(), "internal: tensor ", name, " is not part of the model");
    if (checked_.insert(name).second) {
      const TensorMeta meta = source_.meta(name);  // throws naming the tensor when missing
      TPS_CHECK(meta.shape == it->second, "tensor ", name, " has shape ", shape_text(meta.shape), " in ",
                source_.describe(), " but config.json implies ", shape_text(it->second));
    }
    return it->second;
  }

  size_t bytes() const { return bytes_; }

 private:
  static std::vector<int64_t> shape_of(const std::vector<Range>& ranges) {
    std::vector<int64_t> s;
    for (const auto& r : ranges) s.push_back(r.size());
    return s;
  }

  const WeightSource& source_;
  Backend& backend_;
  DType dtype_;
  std::map<std::string, std::vector<int64_t>> expected_;
  std::set<std::string> checked_;
  std::vector<char> staging_;
  size_t bytes_ = 0;
  bool device_fill_ = true;  // until the backend says it cannot generate weights
  LoadProgress progress_;    // logs every ~2 s on long loads
};

LayerWeights load_layer(const ModelSpec& s, const ShardLayout& lay, Loader& ld, const WeightSource& source,
                        const std::string& prefix, bool moe) {
  const bool fused = moe && source.has(prefix + "mlp.experts.gate_up_proj");
  const int64_t h = s.hidden_size, d = s.head_dim;
  const int64_t hq = lay.local_q_heads(s), hkv = lay.local_kv_heads(s);
  const int64_t q0 = int64_t(lay.tp_rank) * hq * d, kv0 = int64_t(lay.first_kv_head(s)) * d;
  LayerWeights w;
  w.moe = moe;
  w.input_norm = ld.whole(prefix + "input_layernorm.weight");
  w.post_norm = ld.whole(prefix + "post_attention_layernorm.weight");
  w.q_norm = ld.whole(prefix + "self_attn.q_norm.weight");
  w.k_norm = ld.whole(prefix + "self_attn.k_norm.weight");
  const std::string a = prefix + "self_attn.";
  w.qkv = ld.load({(hq + 2 * hkv) * d, h}, {{a + "q_proj.weight", {{q0, q0 + hq * d}, {0, h}}},
                                            {a + "k_proj.weight", {{kv0, kv0 + hkv * d}, {0, h}}},
                                            {a + "v_proj.weight", {{kv0, kv0 + hkv * d}, {0, h}}}});
  w.o_proj = ld.load({h, hq * d}, {{a + "o_proj.weight", {{0, h}, {q0, q0 + hq * d}}}});
  if (!moe) {
    const int64_t i = lay.local_dense_intermediate(s), i0 = int64_t(lay.tp_rank) * i;
    const std::string m = prefix + "mlp.";
    w.gate_up = ld.load({2 * i, h}, {{m + "gate_proj.weight", {{i0, i0 + i}, {0, h}}},
                                     {m + "up_proj.weight", {{i0, i0 + i}, {0, h}}}});
    w.down = ld.load({h, i}, {{m + "down_proj.weight", {{0, h}, {i0, i0 + i}}}});
    return w;
  }
  w.router = ld.whole(prefix + "mlp.gate.weight");
  const int64_t experts = lay.local_experts(s), e0 = lay.first_expert(s);
  const int64_t full_i = s.moe_intermediate_size, i = lay.local_moe_intermediate(s);
  const int64_t i0 = lay.expert_parallel ? 0 : int64_t(lay.tp_rank) * i;
  // The first local expert's tensors checked against config.json before allocating every expert's.
  if (fused) {
    ld.checked_shape(prefix + "mlp.experts.gate_up_proj");
    ld.checked_shape(prefix + "mlp.experts.down_proj");
  } else if (experts > 0) {
    const std::string ep = prefix + "mlp.experts." + std::to_string(e0) + ".";
    for (const char* name : {"gate_proj.weight", "up_proj.weight", "down_proj.weight"})
      ld.checked_shape(ep + name);
  }
  w.gate_up = ld.alloc({experts, 2 * i, h});
  w.down = ld.alloc({experts, h, i});
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t ge = e0 + e;
    if (fused) {
      const std::string gu = prefix + "mlp.experts.gate_up_proj", dn = prefix + "mlp.experts.down_proj";
      ld.fill(w.gate_up.rows(e, e + 1), {{gu, {{ge, ge + 1}, {i0, i0 + i}, {0, h}}},
                                         {gu, {{ge, ge + 1}, {full_i + i0, full_i + i0 + i}, {0, h}}}});
      ld.fill(w.down.rows(e, e + 1), {{dn, {{ge, ge + 1}, {0, h}, {i0, i0 + i}}}});
    } else {
      const std::string ep = prefix + "mlp.experts." + std::to_string(ge) + ".";
      ld.fill(w.gate_up.rows(e, e + 1), {{ep + "gate_proj.weight", {{i0, i0 + i}, {0, h}}},
                                         {ep + "up_proj.weight", {{i0, i0 + i}, {0, h}}}});
      ld.fill(w.down.rows(e, e + 1), {{ep + "down_proj.weight", {{0, h}, {i0, i0 + i}}}});
    }
  }
  return w;
}

}  // namespace

ModelWeights load_model_weights(const ModelSpec& s, const ShardLayout& lay, const WeightSource& source,
                                Backend& backend, bool load_mtp) {
  // What this rank will hold, for progress reports (pieces count as tensors as they arrive).
  const uint64_t total = static_cast<uint64_t>(s.num_parameters()) * dtype_size(backend.weight_dtype()) /
                         static_cast<uint64_t>(std::max(1, lay.tp_size));
  Loader ld(s, source, backend, total,
            static_cast<int64_t>(expected_tensors(s, ExpertLayout::kPerExpert).size()));

  ModelWeights w;
  const int64_t v = lay.local_vocab(s), v0 = lay.vocab_begin(s), h = s.hidden_size;
  ld.checked_shape(weight_names::embed_tokens());
  w.embed = ld.load({v, h}, {{weight_names::embed_tokens(), {{v0, v0 + v}, {0, h}}}});
  for (int l = 0; l < s.num_layers; ++l)
    w.layers.push_back(load_layer(s, lay, ld, source, weight_names::layer_prefix(l), s.is_moe_layer(l)));
  w.final_norm = ld.whole(weight_names::final_norm());
  w.lm_head =
      s.tie_word_embeddings ? w.embed : ld.load({v, h}, {{weight_names::lm_head(), {{v0, v0 + v}, {0, h}}}});
  if (load_mtp) {
    TPS_CHECK(s.num_nextn_predict_layers > 0, "the checkpoint has no MTP head (num_nextn_predict_layers)");
    const std::string m = weight_names::mtp_prefix();
    w.mtp.present = true;
    w.mtp.fc_embedding = ld.load({h, h}, {{m + "fc.weight", {{0, h}, {0, h}}}});
    w.mtp.fc_hidden = ld.load({h, h}, {{m + "fc.weight", {{0, h}, {h, 2 * h}}}});
    w.mtp.norm_embedding = ld.whole(m + "pre_fc_norm_embedding.weight");
    w.mtp.norm_hidden = ld.whole(m + "pre_fc_norm_hidden.weight");
    w.mtp.layer = load_layer(s, lay, ld, source, m + "layers.0.", s.num_experts > 0);
    w.mtp.final_norm = ld.whole(m + "norm.weight");
  }
  w.bytes = ld.bytes();
  if (lay.tp_rank == 0) {  // what the checkpoint holds beyond the model: said once, by rank 0
    std::vector<std::string> names;
    for (ExpertLayout layout : {ExpertLayout::kPerExpert, ExpertLayout::kFused})
      for (const auto& t : expected_tensors(s, layout)) names.push_back(t.name);
    warn_unexpected_tensors(source, names);
  }
  log_info("loaded ", source.describe(), ": ", static_cast<double>(w.bytes) / 1e6,
           " MB of weights resident on this rank", " (tp ", lay.tp_rank, "/", lay.tp_size, ", ep ",
           lay.ep_rank, "/", lay.ep_size, ")");
  return w;
}

}  // namespace tpserve
