#include "bench/tp_decode/scripted_drafts.h"

#include "common/error.h"

namespace tpserve::bench {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

void ReferenceContinuations::add(int concurrency, int round, int64_t request_id,
                                 std::vector<int32_t> tokens) {
  by_key_[{concurrency, round, request_id}] = std::move(tokens);
}

const std::vector<int32_t>* ReferenceContinuations::find(int concurrency, int round,
                                                         int64_t request_id) const {
  const auto it = by_key_.find({concurrency, round, request_id});
  return it == by_key_.end() ? nullptr : &it->second;
}

ScriptedDraftSource::ScriptedDraftSource(std::shared_ptr<const ReferenceContinuations> reference,
                                         double acceptance, int prompt_len, uint64_t seed)
    : reference_(std::move(reference)), acceptance_(acceptance), prompt_len_(prompt_len), seed_(seed) {
  TPS_CHECK(reference_ != nullptr, "scripted drafts need a reference run");
  TPS_CHECK(acceptance >= 0.0 && acceptance <= 1.0, "scripted drafts: acceptance ", acceptance,
            " is not in [0, 1]");
  TPS_CHECK(reference_->vocab() >= 2 && prompt_len >= 1, "scripted drafts: vocab ", reference_->vocab(),
            ", prompt length ", prompt_len);
}

void ScriptedDraftSource::set_run(int concurrency, int round) {
  concurrency_ = concurrency;
  round_ = round;
}

bool ScriptedDraftSource::right_at(int64_t request_id, int position) const {
  uint64_t h = mix(seed_ ^ mix(static_cast<uint64_t>(concurrency_) << 32 ^ static_cast<uint32_t>(round_)));
  h = mix(h ^ static_cast<uint64_t>(request_id));
  h = mix(h ^ static_cast<uint64_t>(position));
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // uniform in [0, 1)
  return u < acceptance_;
}

std::vector<int32_t> ScriptedDraftSource::propose(int64_t request_id, const std::vector<int32_t>& tokens,
                                                  int k) const {
  const std::vector<int32_t>* ref = reference_->find(concurrency_, round_, request_id);
  const int generated = static_cast<int>(tokens.size()) - prompt_len_;
  std::vector<int32_t> drafts(k, 0);
  for (int j = 0; j < k; ++j) {
    const int at = generated + j;
    if (ref == nullptr || at < 0 || at >= static_cast<int>(ref->size())) continue;
    const int32_t right = (*ref)[at];
    drafts[j] = right_at(request_id, at) ? right : (right + 1) % reference_->vocab();
  }
  return drafts;
}

DraftScript ScriptedDraftSource::script() const {
  return [this](int64_t request_id, const std::vector<int32_t>& tokens, int k) {
    return propose(request_id, tokens, k);
  };
}

}  // namespace tpserve::bench
