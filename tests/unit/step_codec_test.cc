// The control-plane message: every StepBatch field survives encode/decode (a field left out would make the
// followers run a different step than rank 0, and hang in a collective), and malformed messages are refused.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "runtime/engine/step_codec.h"

namespace tpserve {
namespace {

TEST(StepCodec, RoundTripsEveryField) {
  StepBatch b;
  b.token_ids = {1, 2, -3};
  b.positions = {4, 5, 6};
  b.slot_mapping = {7, 8, 9};
  b.query_start = {0, 3};
  b.context_lens = {7};
  b.block_tables = {0, 1};
  b.max_blocks_per_seq = 2;
  b.sample_rows = {0, 1, 2};
  b.sampling = {{0.5f, 3, 0.9f, 0.1f, 42}, {}, {1.0f, 0, 1.0f, 0.0f, -7}};
  b.sample_counters = {5, 6, 7};
  b.group_start = {0, 3};
  b.mtp_next_tokens = {-1, -2, -3};
  b.draft_slot = {4};
  b.group_seq = {0};
  b.logprobs = {-1, 3, 0};
  b.logit_adjustments = {{0, 17, 2.5f, 1.0f, 0.0f}, {2, 3, -INFINITY, 1.3f, 0.75f}};
  b.mask_rows = {2};
  b.token_masks = {0x80000001u, 7u};
  const StepBatch d = decode_step(encode_step(b));
  EXPECT_EQ(d.token_ids, b.token_ids);
  EXPECT_EQ(d.positions, b.positions);
  EXPECT_EQ(d.slot_mapping, b.slot_mapping);
  EXPECT_EQ(d.query_start, b.query_start);
  EXPECT_EQ(d.context_lens, b.context_lens);
  EXPECT_EQ(d.block_tables, b.block_tables);
  EXPECT_EQ(d.max_blocks_per_seq, 2);
  EXPECT_EQ(d.sample_rows, b.sample_rows);
  ASSERT_EQ(d.sampling.size(), 3u);
  EXPECT_EQ(d.sampling[0].top_k, 3);
  EXPECT_EQ(d.sampling[2].seed, -7);
  EXPECT_EQ(d.sample_counters, b.sample_counters);
  EXPECT_EQ(d.group_start, b.group_start);
  EXPECT_EQ(d.mtp_next_tokens, b.mtp_next_tokens);
  EXPECT_EQ(d.draft_slot, b.draft_slot);
  EXPECT_EQ(d.group_seq, b.group_seq);
  EXPECT_EQ(d.logprobs, b.logprobs);
  ASSERT_EQ(d.logit_adjustments.size(), 2u);
  EXPECT_EQ(d.logit_adjustments[1].row, 2);
  EXPECT_EQ(d.logit_adjustments[1].token, 3);
  EXPECT_EQ(d.logit_adjustments[1].bias, -INFINITY);
  EXPECT_EQ(d.logit_adjustments[1].scale, 1.3f);
  EXPECT_EQ(d.logit_adjustments[1].subtract, 0.75f);
  EXPECT_EQ(d.logit_adjustments[0].bias, 2.5f);
  EXPECT_EQ(d.mask_rows, b.mask_rows);
  EXPECT_EQ(d.token_masks, b.token_masks);
  // The encoding covers the whole struct: a new field must be added to the codec (and here).
  static_assert(sizeof(StepBatch) == 17 * sizeof(std::vector<int32_t>) + 8,
                "StepBatch changed: update step_codec");
}

TEST(StepCodec, RefusesMalformedMessages) {
  StepBatch b;
  b.token_ids = {1};
  std::vector<char> bytes = encode_step(b);
  EXPECT_THROW(decode_step(std::vector<char>(bytes.begin(), bytes.end() - 1)), Error);
  bytes[0] ^= 1;
  EXPECT_THROW(decode_step(bytes), Error);
  std::vector<char> longer = encode_step(b);
  longer.push_back(0);
  EXPECT_THROW(decode_step(longer), Error);
}

}  // namespace
}  // namespace tpserve
