#include "runtime/engine/step_codec.h"

#include <cstdint>
#include <cstring>

#include "common/error.h"

namespace tpserve {
namespace {

class Writer {
 public:
  template <typename T>
  void vec(const std::vector<T>& v) {
    scalar(static_cast<uint64_t>(v.size()));
    raw(v.data(), v.size() * sizeof(T));
  }
  template <typename T>
  void scalar(T v) {
    raw(&v, sizeof(T));
  }
  void value(int32_t v) { scalar(v); }
  std::vector<char> take() { return std::move(out_); }

 private:
  void raw(const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    out_.insert(out_.end(), c, c + n);
  }
  std::vector<char> out_;
};

class Reader {
 public:
  explicit Reader(const std::vector<char>& in) : in_(in) {}
  template <typename T>
  void vec(std::vector<T>& v) {
    const uint64_t n = scalar<uint64_t>();
    TPS_CHECK(n <= (in_.size() - pos_) / sizeof(T), "step message: vector of ", n,
              " elements overruns the buffer");
    v.resize(n);
    raw(v.data(), n * sizeof(T));
  }
  template <typename T>
  T scalar() {
    T v;
    raw(&v, sizeof(T));
    return v;
  }
  void value(int32_t& v) { v = scalar<int32_t>(); }
  bool done() const { return pos_ == in_.size(); }

 private:
  void raw(void* p, size_t n) {
    TPS_CHECK(pos_ + n <= in_.size(), "step message truncated");
    if (n) std::memcpy(p, in_.data() + pos_, n);
    pos_ += n;
  }
  const std::vector<char>& in_;
  size_t pos_ = 0;
};

constexpr uint32_t kMagic = 0x54505335;  // "TPS5": bump when the layout changes

}  // namespace

// Every field of StepBatch, in message order: encode and decode walk the same list.
template <typename Batch, typename Visit>
void visit_fields(Batch& b, Visit&& v) {
  v.vec(b.token_ids);
  v.vec(b.positions);
  v.vec(b.slot_mapping);
  v.vec(b.query_start);
  v.vec(b.context_lens);
  v.vec(b.block_tables);
  v.value(b.max_blocks_per_seq);
  v.vec(b.sample_rows);
  v.vec(b.sampling);
  v.vec(b.sample_counters);
  v.vec(b.group_start);
  v.vec(b.mtp_next_tokens);
  v.vec(b.draft_slot);
  v.vec(b.group_seq);
  v.vec(b.logprobs);
  v.vec(b.logit_adjustments);
  v.vec(b.mask_rows);
  v.vec(b.token_masks);
}

std::vector<char> encode_step(const StepBatch& b) {
  Writer w;
  w.scalar(kMagic);
  visit_fields(b, w);
  return w.take();
}

StepBatch decode_step(const std::vector<char>& bytes) {
  Reader r(bytes);
  TPS_CHECK(r.scalar<uint32_t>() == kMagic, "step message: bad magic");
  StepBatch b;
  visit_fields(b, r);
  TPS_CHECK(r.done(), "step message: trailing bytes");
  return b;
}

}  // namespace tpserve
