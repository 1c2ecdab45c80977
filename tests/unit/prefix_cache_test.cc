// Prefix caching through the scheduler: where a request's first chunk starts, what it reports, the MTP rule,
// and, against a simulated model whose KV cache remembers what each row wrote, that requests sharing
// prefixes get exactly the tokens they get when every token is computed (under eviction, preemption and
// speculation).
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "common/counter_hash.h"
#include "runtime/engine/scheduler.h"

namespace tpserve {
namespace {

constexpr int kBs = 4;

Request request(int64_t id, std::vector<int32_t> prompt, int max_tokens) {
  return Request{.id = id, .prompt = std::move(prompt), .max_tokens = max_tokens, .ignore_eos = true};
}

std::vector<int32_t> iota_tokens(int n, int from = 100) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = from + i;
  return t;
}

// Completes step `b`, answering every sampled row with 7 and accepting no drafts.
void answer(Scheduler& s, const StepBatch& b) {
  StepResult r;
  r.tokens.assign(b.sample_rows.size(), 7);
  if (!b.group_start.empty()) r.accepted.assign(b.num_groups(), 0);
  s.complete(r);
}

// Runs `s` until idle, answering as answer() does.
void drain(Scheduler& s) {
  while (s.has_work()) {
    auto b = s.schedule();
    ASSERT_TRUE(b);
    answer(s, *b);
  }
}

// Requests 1 and 2 with one prompt of `len` tokens, then 3 with another of `other_len`.
void add_two_alike_then_another(Scheduler& s, int len, int other_len, int max_tokens) {
  s.add(request(1, iota_tokens(len), max_tokens));
  s.add(request(2, iota_tokens(len), max_tokens));
  s.add(request(3, iota_tokens(other_len, 500), max_tokens));
}

SchedulerLimits limits(bool prefix_caching) {
  return {.max_batch = 4,
          .max_step_tokens = 64,
          .max_seq_len = 128,
          .max_blocks_per_seq = 32,
          .prefix_caching = prefix_caching};
}

TEST(PrefixCache, ARequestStartsAfterTheBlocksAnotherComputed) {
  Scheduler s(limits(true), 32, kBs, {});
  s.add(request(1, iota_tokens(10), 3));
  drain(s);
  EXPECT_EQ(s.take_admitted().front().cached_tokens, 0);
  // Same ten tokens, then others: the two full blocks are taken, the chunk starts at position 8.
  auto prompt = iota_tokens(10);
  prompt.push_back(5);
  s.add(request(2, prompt, 3));
  auto b = s.schedule();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->positions.front(), 8);
  EXPECT_EQ(b->token_ids.size(), 3u);
  EXPECT_EQ(b->context_lens.front(), 11);
  const auto admitted = s.take_admitted();
  ASSERT_EQ(admitted.size(), 1u);
  EXPECT_EQ(admitted[0].request_id, 2);
  EXPECT_EQ(admitted[0].cached_tokens, 8);
  StepResult r;
  r.tokens.assign(b->sample_rows.size(), 7);
  s.complete(r);
  drain(s);
  // A prompt of exactly two blocks, all cached: its last token is computed anyway (its logits are needed).
  s.add(request(3, iota_tokens(8), 2));
  b = s.schedule();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->positions.front(), 4);
  EXPECT_EQ(s.take_admitted()[0].cached_tokens, 4);
  EXPECT_EQ(s.prefix_cache_metrics().queried_tokens, 10 + 11 + 8);
  EXPECT_EQ(s.prefix_cache_metrics().hit_tokens, 8 + 4);
  // Without prefix caching nothing is looked up or reported.
  Scheduler off(limits(false), 32, kBs, {});
  for (int64_t id : {1, 2}) {
    off.add(request(id, iota_tokens(10), 2));
    drain(off);
  }
  EXPECT_EQ(off.take_admitted().back().cached_tokens, 0);
  EXPECT_EQ(off.prefix_cache_metrics().queried_tokens, 0);
}

// Requests with one prompt that arrive together (n choices, a batch): the first computes it; the others wait
// one step and take its blocks from the cache; a different prompt behind them is not held up.
TEST(PrefixCache, ThePromptOfRequestsAdmittedTogetherIsComputedOnce) {
  for (const bool mtp : {false, true}) {
    SCOPED_TRACE(mtp ? "MTP key" : "block key");
    SpeculativeSettings spec;
    if (mtp) {
      spec.num_tokens = 1;
      spec.device_draft = [](int slot, int j) { return -(1 + slot + j); };
    }
    Scheduler s(limits(true), 32, kBs, {}, spec);
    add_two_alike_then_another(s, 10, 10, 2);
    auto b = s.schedule();
    ASSERT_TRUE(b);
    EXPECT_EQ(b->num_seqs(), 2);  // 1 and 3; 2 waits for 1's blocks
    EXPECT_EQ(b->num_tokens(), 20);
    auto admitted = s.take_admitted();
    ASSERT_EQ(admitted.size(), 2u);
    EXPECT_EQ(admitted[1].request_id, 3);
    answer(s, *b);
    b = s.schedule();
    ASSERT_TRUE(b);
    admitted = s.take_admitted();
    ASSERT_EQ(admitted.size(), 1u);
    EXPECT_EQ(admitted[0].request_id, 2);
    EXPECT_EQ(admitted[0].cached_tokens, 8);            // its last token's block is computed (its logits)
    EXPECT_EQ(b->num_tokens(), 2 * (mtp ? 2 : 1) + 2);  // 1 and 3 decode (1 + k rows each), 2 computes 2
    answer(s, *b);
    drain(s);
  }
  // Without prefix caching both compute it in the first step.
  Scheduler off(limits(false), 32, kBs, {});
  add_two_alike_then_another(off, 10, 10, 2);
  auto b = off.schedule();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->num_seqs(), 3);
}

// The one that waits keeps its place in the batch: with room for two, the other prompt waits behind it (it
// would otherwise run beside the first to the end, and the second start only after one finished).
TEST(PrefixCache, ARequestHeldBackKeepsItsPlaceInTheBatch) {
  SchedulerLimits two = limits(true);
  two.max_batch = 2;
  Scheduler s(two, 32, kBs, {});
  add_two_alike_then_another(s, 10, 10, 20);
  auto b = s.schedule();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->num_seqs(), 1);
  EXPECT_EQ(s.num_deferred(), 1);
  answer(s, *b);
  s.schedule();
  const auto admitted = s.take_admitted();
  ASSERT_EQ(admitted.size(), 2u);
  EXPECT_EQ(admitted[1].request_id, 2);
  EXPECT_EQ(admitted[1].cached_tokens, 8);
  EXPECT_EQ(s.num_deferred(), 0);
}

// What it is promised is the rest of its prompt's blocks, not those it takes from the cache: with 14 blocks,
// the first request's 10 leave 4, and the one held back needs 1 of them next step, so a short prompt behind
// it still runs now.
TEST(PrefixCache, ARequestHeldBackIsPromisedOnlyTheBlocksItWillCompute) {
  Scheduler s(limits(true), 14, kBs, {});
  add_two_alike_then_another(s, 40, 4, 2);
  auto b = s.schedule();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->num_seqs(), 2);
  EXPECT_EQ(s.num_deferred(), 1);
  answer(s, *b);
  s.schedule();
  const auto admitted = s.take_admitted();
  ASSERT_EQ(admitted.size(), 3u);
  EXPECT_EQ(admitted[2].request_id, 2);
  EXPECT_EQ(admitted[2].cached_tokens, 36);
}

TEST(PrefixCache, GeneratedTokensAreCachedToo) {
  Scheduler s(limits(true), 32, kBs, {});
  s.add(request(1, iota_tokens(5), 7));  // 5 + 7 tokens, the last one without KV: 2 full blocks cached
  drain(s);
  auto prompt = iota_tokens(5);
  prompt.insert(prompt.end(), {7, 7, 7, 7});
  s.add(request(2, prompt, 1));
  s.schedule();
  EXPECT_EQ(s.take_admitted().back().cached_tokens, 8);
}

TEST(PrefixCache, MtpDraftingMatchesABlockOnlyWithTheTokenAfterIt) {
  SpeculativeSettings mtp;
  mtp.num_tokens = 1;
  mtp.device_draft = [](int slot, int j) { return -(1 + slot + j); };
  Scheduler s(limits(true), 32, kBs, {}, mtp);
  s.add(request(1, iota_tokens(13), 1));
  drain(s);
  // The draft layer's KV at position 11 was computed with token 12 (112): the same prompt takes all three
  // blocks, one going on with another token the first two.
  s.add(request(2, iota_tokens(13), 1));
  drain(s);
  auto other = iota_tokens(12);
  other.push_back(5);
  s.add(request(3, other, 1));
  drain(s);
  const auto admitted = s.take_admitted();
  ASSERT_EQ(admitted.size(), 3u);
  EXPECT_EQ(admitted[1].cached_tokens, 12);
  EXPECT_EQ(admitted[2].cached_tokens, 8);
}

// A request that stops at a token before the last draft accepted (max_tokens, EOS, a stop id) counts the
// drafts after it as cached KV; only blocks within its tokens enter the prefix cache.
TEST(PrefixCache, AStopBeforeTheLastAcceptedDraftEntersOnlyItsOwnBlocks) {
  SpeculativeSettings spec;
  spec.num_tokens = 3;
  spec.script = [](int64_t, const std::vector<int32_t>&, int k) { return std::vector<int32_t>(k, 7); };
  Scheduler s(limits(true), 32, kBs, {}, spec);
  s.add(request(1, iota_tokens(13), 2));
  auto b = s.schedule();  // the prompt
  ASSERT_TRUE(b);
  StepResult r;
  r.tokens = {7};
  r.accepted = {0};
  s.complete(r);
  b = s.schedule();  // token 13 and three drafts, all accepted; the first emitted token is the last allowed
  ASSERT_TRUE(b);
  ASSERT_EQ(b->token_ids.size(), 4u);
  r.tokens = {7, 7, 7, 7};
  r.accepted = {3};
  std::vector<TokenEvent> events;
  ASSERT_NO_THROW(events = s.complete(r));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].finish, FinishReason::kLength);
  EXPECT_FALSE(s.has_work());
  // Its 15 tokens: three full blocks cached, not a fourth (positions 12..15 hold one token past its end).
  auto longer = iota_tokens(13);
  longer.insert(longer.end(), {7, 7, 7, 7});
  s.add(request(2, longer, 1));
  s.schedule();
  EXPECT_EQ(s.take_admitted().back().cached_tokens, 12);
}

// A model in miniature. Each row writes (token, position) to its KV slot; a sampled row's token is a hash of
// the KV its sequence's block table reaches (positions 0..its own), over a vocabulary of 3 so that prompts
// and answers recur: stale or foreign KV anywhere in a context changes the token. Drafts are accepted while
// they equal the token drawn at the row before. With an MTP head, each row also writes a draft layer's KV,
// (token, next token, position), the next token being the one after the row (known, or drawn at a sampled
// row this step); after the step each sequence's drafts are hashes of the draft layer's KV up to its last
// accepted row and, for drafts after the first, of the draft steps' own writes at the positions after it
// (as MTP draft steps write them). Before drafting, the draft layer's KV up to the last accepted row must
// hold each position's token and the token after it; entries that do not are counted.
class KvModel {
 public:
  KvModel(int num_blocks, int max_batch, int k)
      : kv_(static_cast<size_t>(num_blocks) * kBs),
        draft_kv_(kv_.size()),
        drafts_(static_cast<size_t>(max_batch) * std::max(k, 1), 0),
        k_(k) {}

  // MTP: the token id that stands for draft j of a draft-table slot.
  int32_t draft_id(int slot, int j) const { return -(1 + slot * k_ + j); }
  // Draft-layer KV entries read that did not hold their position's token and the next one.
  int64_t stale_draft_kv() const { return stale_draft_kv_; }

  StepResult run(const StepBatch& b) {
    const size_t rows = b.token_ids.size();
    std::vector<int32_t> input(rows);
    for (size_t i = 0; i < rows; ++i) {
      input[i] = b.token_ids[i] >= 0 ? b.token_ids[i] : drafts_.at(-(1 + b.token_ids[i]));
      kv_[b.slot_mapping[i]] = {input[i], -1, b.positions[i]};
    }
    std::vector<int> seq_of(rows);
    for (int q = 0; q + 1 < static_cast<int>(b.query_start.size()); ++q)
      for (int row = b.query_start[q]; row < b.query_start[q + 1]; ++row) seq_of[row] = q;
    StepResult r;
    for (int32_t row : b.sample_rows) r.tokens.push_back(draw(kv_, b, seq_of[row], b.positions[row], 0));
    for (int g = 0; g + 1 < static_cast<int>(b.group_start.size()); ++g) {
      int accepted = 0;  // draft j is row (start + j + 1)'s input, checked against row (start + j)'s token
      const int start = b.group_start[g], end = b.group_start[g + 1];
      while (start + accepted + 1 < end &&
             input[b.sample_rows[start + accepted + 1]] == r.tokens[start + accepted])
        ++accepted;
      r.accepted.push_back(accepted);
    }
    if (b.mtp_next_tokens.empty()) return r;
    for (size_t i = 0; i < rows; ++i) {
      const int32_t n = b.mtp_next_tokens[i];
      draft_kv_[b.slot_mapping[i]] = {input[i], n >= 0 ? n : r.tokens.at(-(1 + n)), b.positions[i]};
    }
    for (size_t g = 0; g < b.draft_slot.size(); ++g) {
      if (b.draft_slot[g] < 0) continue;
      const int q = b.group_seq[g];
      const int last = b.group_start[g] + r.accepted[g];
      const int p = b.positions[b.sample_rows[last]];
      for (int i = 0; i <= p; ++i) {
        const Entry& d = entry(draft_kv_, b, q, i);
        const int32_t next = i < p ? entry(kv_, b, q, i + 1).token : r.tokens[last];
        stale_draft_kv_ += d.token != entry(kv_, b, q, i).token || d.next != next || d.position != i;
      }
      int32_t token = r.tokens[last];
      for (int j = 0; j < k_; ++j) {
        if (j > 0) entry(draft_kv_, b, q, p + j) = {token, -1, p + j};  // draft step j's write
        token = draw(draft_kv_, b, q, p + j, static_cast<uint64_t>(token) + 1);
        drafts_[static_cast<size_t>(b.draft_slot[g]) * k_ + j] = token;
      }
    }
    return r;
  }

 private:
  struct Entry {
    int32_t token = -1, next = -1, position = -1;
  };
  static Entry& entry(std::vector<Entry>& kv, const StepBatch& b, int q, int p) {
    const int32_t block = b.block_tables[static_cast<size_t>(q) * b.max_blocks_per_seq + p / kBs];
    return kv[static_cast<size_t>(block) * kBs + p % kBs];
  }
  // A token from the hash of `kv` over positions 0..p of sequence q (and a salt).
  static int32_t draw(std::vector<Entry>& kv, const StepBatch& b, int q, int p, uint64_t salt) {
    uint64_t h = salt;
    for (int i = 0; i <= p; ++i) {
      const Entry& e = entry(kv, b, q, i);
      h = mix64(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(e.token)) << 40) ^
                (static_cast<uint64_t>(static_cast<uint32_t>(e.next)) << 20) ^
                static_cast<uint32_t>(e.position));
    }
    return static_cast<int32_t>(h % 3);
  }

  std::vector<Entry> kv_, draft_kv_;
  std::vector<int32_t> drafts_;  // [max_batch][k]: the draft table
  int k_;
  int64_t stale_draft_kv_ = 0;
};

struct Workload {
  std::map<int64_t, std::vector<int32_t>> tokens;
  PrefixCacheMetrics prefix;
  int64_t preemptions = 0;
  int64_t accepted = 0;
  int64_t stale_draft_kv = 0;
  double kv_usage = 1;  // after the last request
};

enum class Drafts { kNone, kScripted, kMtp };

// 40 requests in waves of four, prompts of a shared 6-token system prompt plus a short tail over 3 ids, on a
// cache too small to keep every prefix (and to run four long sequences without preemption); k = 2 drafts.
// Each wave's third request is aborted after two steps (its tokens are left out).
Workload serve(bool prefix_caching, Drafts drafts) {
  constexpr int kBlocks = 20, kMaxBatch = 4, kDrafts = 2;
  KvModel model(kBlocks, kMaxBatch, kDrafts);
  SpeculativeSettings spec;
  if (drafts != Drafts::kNone) spec.num_tokens = kDrafts;
  if (drafts == Drafts::kScripted)
    spec.script = [](int64_t id, const std::vector<int32_t>& tokens, int k) {
      std::vector<int32_t> d(k);
      for (int j = 0; j < k; ++j) d[j] = static_cast<int32_t>(mix64(id * 131 + tokens.size() * 7 + j) % 3);
      return d;
    };
  if (drafts == Drafts::kMtp)
    spec.device_draft = [&model](int slot, int j) { return model.draft_id(slot, j); };
  Scheduler s({.max_batch = kMaxBatch,
               .max_step_tokens = 12,
               .max_seq_len = 64,
               .max_blocks_per_seq = 16,
               .prefix_caching = prefix_caching},
              kBlocks, kBs, {}, spec);
  std::mt19937 rng(99);
  Workload w;
  int64_t next_id = 1;
  for (int wave = 0; wave < 10; ++wave) {
    for (int i = 0; i < 4; ++i) {
      std::vector<int32_t> prompt = {1, 2, 0, 1, 2, 0};
      const int tail = static_cast<int>(rng() % 9);
      for (int t = 0; t < tail; ++t) prompt.push_back(static_cast<int32_t>(rng() % 3));
      s.add(request(next_id++, prompt, 3 + static_cast<int>(rng() % 20)));
    }
    for (int steps = 0; s.has_work(); ++steps) {
      EXPECT_LT(steps, 1000);
      if (steps == 2) s.abort(next_id - 2);  // the wave's third request goes (waiting or running)
      auto b = s.schedule();
      if (!b) break;
      for (const TokenEvent& e : s.complete(model.run(*b))) w.tokens[e.request_id].push_back(e.token);
    }
    w.tokens.erase(next_id - 2);  // what it emitted before its abort depends on the schedule
  }
  w.kv_usage = s.kv_usage();
  w.prefix = s.prefix_cache_metrics();
  w.preemptions = s.preemptions();
  w.accepted = s.speculative_metrics().accepted_tokens;
  w.stale_draft_kv = model.stale_draft_kv();
  return w;
}

TEST(PrefixCache, RequestsGetTheTokensAndDraftsOfComputingEverything) {
  for (Drafts drafts : {Drafts::kNone, Drafts::kScripted, Drafts::kMtp}) {
    SCOPED_TRACE(drafts == Drafts::kNone       ? "no drafts"
                 : drafts == Drafts::kScripted ? "scripted drafts"
                                               : "MTP");
    const Workload plain = serve(false, drafts);
    const Workload cached = serve(true, drafts);
    ASSERT_EQ(plain.tokens.size(), 30u);
    EXPECT_EQ(cached.tokens, plain.tokens);
    // The draft layer read the KV it would have computed (how many drafts are accepted depends on where
    // verifications fall, which preemptions move: not compared).
    EXPECT_EQ(cached.stale_draft_kv, 0);
    EXPECT_EQ(plain.stale_draft_kv, 0);
    if (drafts != Drafts::kNone) {
      EXPECT_GT(cached.accepted, 0);
    }
    // Requests of one wave start together (no hits among them); later waves find at least the system
    // prompt's first block, mostly.
    EXPECT_GE(cached.prefix.hit_tokens, 30 * kBs);
    EXPECT_GT(cached.preemptions, 0);
    EXPECT_EQ(cached.kv_usage, 0);  // every block let go of (cached ones count as free)
  }
}

}  // namespace
}  // namespace tpserve
