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

constexpr uint32_t kMagic = 0x54505332;  // "TPS2": bump when the layout changes

}  // namespace

std::vector<char> encode_step(const StepBatch& b) {
  Writer w;
  w.scalar(kMagic);
  w.vec(b.token_ids);
  w.vec(b.positions);
  w.vec(b.slot_mapping);
  w.vec(b.query_start);
  w.vec(b.context_lens);
  w.vec(b.block_tables);
  w.scalar(static_cast<int32_t>(b.max_blocks_per_seq));
  w.vec(b.sample_rows);
  w.vec(b.sampling);
  w.vec(b.sample_counters);
  w.vec(b.group_start);
  w.vec(b.mtp_next_tokens);
  w.vec(b.draft_slot);
  w.vec(b.group_seq);
  return w.take();
}

StepBatch decode_step(const std::vector<char>& bytes) {
  Reader r(bytes);
  TPS_CHECK(r.scalar<uint32_t>() == kMagic, "step message: bad magic");
  StepBatch b;
  r.vec(b.token_ids);
  r.vec(b.positions);
  r.vec(b.slot_mapping);
  r.vec(b.query_start);
  r.vec(b.context_lens);
  r.vec(b.block_tables);
  b.max_blocks_per_seq = r.scalar<int32_t>();
  r.vec(b.sample_rows);
  r.vec(b.sampling);
  r.vec(b.sample_counters);
  r.vec(b.group_start);
  r.vec(b.mtp_next_tokens);
  r.vec(b.draft_slot);
  r.vec(b.group_seq);
  TPS_CHECK(r.done(), "step message: trailing bytes");
  return b;
}

}  // namespace tpserve
