#include "kvsim/core/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <random>
#include <vector>

namespace kvsim {
namespace {

using V = std::vector<BlockId>;

V block_ids(std::optional<std::span<const BlockId>> s) {
  return s ? V(s->begin(), s->end()) : V{};
}
V table(const KVCacheManager& m, int64_t id) {
  auto s = m.get_block_ids(id);
  return V(s.begin(), s.end());
}

Request make_request(int64_t id, std::vector<int32_t> tokens, int32_t block_size,
                     int32_t max_tokens = 16) {
  Request r;
  r.request_id = id;
  r.num_prompt_tokens = static_cast<int32_t>(tokens.size());
  r.max_tokens = max_tokens;
  r.content.token_ids = std::make_shared<const std::vector<int32_t>>(std::move(tokens));
  r.content.salt = static_cast<uint64_t>(id) + 1;
  r.enable_block_hashing(block_size);
  return r;
}

std::vector<int32_t> iota_tokens(int n, int start = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

// Admits a waiting request the way the scheduler does: lookup, then allocate the whole rest.
std::optional<std::span<const BlockId>> admit(KVCacheManager& m, Request& r,
                                              bool has_running = false) {
  ComputedBlocks hit = m.get_computed_blocks(r);
  AllocateSlotsArgs a;
  a.num_new_tokens = r.num_tokens() - hit.num_computed_tokens;
  a.num_new_computed_tokens = hit.num_computed_tokens;
  a.new_computed_blocks = hit.blocks;
  a.full_sequence_must_fit = true;
  a.has_scheduled_reqs = has_running;
  auto out = m.allocate_slots(r, a);
  if (out) {
    r.num_computed_tokens = hit.num_computed_tokens + a.num_new_tokens;
    r.status = RequestStatus::RUNNING;
  }
  return out;
}

// The free-order example worked by hand from vLLM 0.26's vllm/v1/core/kv_cache_manager.py
// KVCacheManager.free and block_pool.py BlockPool.free_blocks (caching on, bs=4, N=10): R3 gets
// [3, 5].
TEST(KVCacheManager, SpecSection41Illustration) {
  KVCacheManager m({.num_gpu_blocks = 10, .block_size = 4, .max_model_len = 64});
  Request r1 = make_request(1, iota_tokens(10), 4);
  EXPECT_EQ(block_ids(admit(m, r1)), (V{1, 2, 3}));
  EXPECT_TRUE(m.block_pool().is_cached(1));
  EXPECT_TRUE(m.block_pool().is_cached(2));
  EXPECT_FALSE(m.block_pool().is_cached(3));
  EXPECT_EQ(m.block_pool().free_block_queue().get_all_free_blocks(), (V{4, 5, 6, 7, 8, 9}));

  std::vector<int32_t> t2 = iota_tokens(8);
  t2.push_back(100);
  t2.push_back(101);
  Request r2 = make_request(2, t2, 4);
  ComputedBlocks hit = m.get_computed_blocks(r2);
  EXPECT_EQ(hit.blocks, (V{1, 2}));
  EXPECT_EQ(hit.num_computed_tokens, 8);
  EXPECT_EQ(block_ids(admit(m, r2)), (V{4}));
  EXPECT_EQ(table(m, 1), (V{1, 2, 3}));
  EXPECT_EQ(table(m, 2), (V{1, 2, 4}));
  EXPECT_EQ(m.block_pool().ref_cnt(1), 2);

  m.free(r1);
  EXPECT_EQ(m.block_pool().free_block_queue().get_all_free_blocks(), (V{3, 5, 6, 7, 8, 9}));
  Request r3 = make_request(3, iota_tokens(5, 1000), 4);
  EXPECT_EQ(block_ids(admit(m, r3)), (V{3, 5}));
  m.check_invariants();
}

TEST(KVCacheManager, PrefixHitIsCappedSoOneTokenIsRecomputed) {
  KVCacheManager m({.num_gpu_blocks = 16, .block_size = 4, .max_model_len = 64});
  Request a = make_request(0, iota_tokens(8), 4);
  ASSERT_TRUE(admit(m, a));
  m.free(a);
  Request b = make_request(1, iota_tokens(8), 4);  // the same 8-token prompt, fully cached
  ComputedBlocks hit = m.get_computed_blocks(b);
  EXPECT_EQ(hit.blocks.size(), 1u);  // floor((8 - 1) / 4) = 1: the last block is recomputed
  Request c = make_request(2, iota_tokens(9), 4);
  EXPECT_EQ(m.get_computed_blocks(c).blocks.size(), 2u);
}

TEST(KVCacheManager, ComputedBlocksOutParameterIsClearedAndMatchesTheValueForm) {
  KVCacheManager m({.num_gpu_blocks = 16, .block_size = 4, .max_model_len = 64});
  Request a = make_request(0, iota_tokens(13), 4);
  ASSERT_TRUE(admit(m, a));
  ComputedBlocks out;
  out.blocks = {7, 7, 7};  // stale content must not survive
  out.num_computed_tokens = 99;
  Request b = make_request(1, iota_tokens(13), 4);
  m.get_computed_blocks(b, out);
  EXPECT_EQ(out.blocks, m.get_computed_blocks(b).blocks);
  EXPECT_EQ(out.blocks, (V{1, 2, 3}));
  EXPECT_EQ(out.num_computed_tokens, 12);
  Request c = make_request(2, iota_tokens(13, 900), 4);  // no hit
  m.get_computed_blocks(c, out);
  EXPECT_TRUE(out.blocks.empty());
  EXPECT_EQ(out.num_computed_tokens, 0);
}

TEST(KVCacheManager, FreedTablesAreReusedWithoutChangingBehaviour) {
  KVCacheManager m(
      {.num_gpu_blocks = 32, .block_size = 4, .max_model_len = 64, .enable_caching = false});
  for (int64_t id = 0; id < 50; ++id) {
    Request r = make_request(id, iota_tokens(9, static_cast<int>(id) * 100), 4);
    auto got = admit(m, r);
    ASSERT_TRUE(got);
    // The freed table [a, b, c] is prepended in reverse, so the next request gets [c, b, a].
    const V want = id % 2 == 0 ? V{1, 2, 3} : V{3, 2, 1};
    EXPECT_EQ(block_ids(got), want) << "request " << id;
    EXPECT_EQ(table(m, id), want);
    m.free(r);
    EXPECT_TRUE(table(m, id).empty());
    m.check_invariants();
  }
}

TEST(KVCacheManager, DecodeAllocatesANewBlockExactlyAtBlockBoundaries) {
  KVCacheManager m(
      {.num_gpu_blocks = 16, .block_size = 4, .max_model_len = 64, .enable_caching = false});
  Request r = make_request(0, iota_tokens(7), 4);
  ASSERT_TRUE(admit(m, r));
  EXPECT_EQ(table(m, 0).size(), 2u);
  EXPECT_EQ(m.padding_tokens(), 1);
  // Sampled token 7 arrives; decode steps schedule 1 token each.
  for (int step = 0; step < 6; ++step) {
    r.append_output_tokens(1);
    const int32_t c = r.num_computed_tokens;
    auto out = m.allocate_slots(r, {.num_new_tokens = 1});
    ASSERT_TRUE(out);
    EXPECT_EQ(out->size(), c % 4 == 0 ? 1u : 0u) << "computed " << c;
    r.num_computed_tokens += 1;
    EXPECT_EQ(m.held_tokens(), r.num_computed_tokens);
  }
  EXPECT_EQ(table(m, 0).size(), 4u);  // 13 tokens
  EXPECT_EQ(m.padding_tokens(), 16 - 13);
  m.check_invariants();
}

// allocate_one_new_block (the lazy decodes' one-block event) against allocate_slots(n = 1) on
// a twin manager, over random admissions (shared prefixes, so hits and evictions), decodes,
// max_model_len caps and frees in a small pool: the same block, table, free queue, hashes and
// counters after every call, or false exactly when it is not the one-block case.
TEST(KVCacheManager, OneNewBlockIsAllocateSlotsOfOneToken) {
  std::mt19937_64 rng(27027);
  for (int round = 0; round < 40; ++round) {
    const int32_t bs = 4;
    const KVCacheManagerConfig c{.num_gpu_blocks = 24 + round % 9,
                                 .block_size = bs,
                                 .max_model_len = 40 + round % 7,
                                 .enable_caching = round % 4 != 0};
    KVCacheManager ref(c);
    KVCacheManager fast(c);
    std::vector<Request> rr, fr;
    int64_t one_block_calls = 0;
    for (int op = 0; op < 600; ++op) {
      const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
      if (kind == 0 || rr.empty()) {  // admit a request, often on a shared prefix
        const auto id = static_cast<int64_t>(rr.size());
        const int len = std::uniform_int_distribution<int>(1, 20)(rng);
        const int start = std::uniform_int_distribution<int>(0, 2)(rng) * 1000;
        rr.push_back(make_request(id, iota_tokens(len, start), bs, 64));
        fr.push_back(make_request(id, iota_tokens(len, start), bs, 64));
        const bool a = admit(ref, rr.back()).has_value();
        ASSERT_EQ(admit(fast, fr.back()).has_value(), a);
        if (!a) rr.back().status = fr.back().status = RequestStatus::FINISHED_ABORTED;
      } else if (kind == 1) {  // free one
        const size_t i = std::uniform_int_distribution<size_t>(0, rr.size() - 1)(rng);
        ref.free(rr[i]);
        fast.free(fr[i]);
        rr[i].status = fr[i].status = RequestStatus::FINISHED_ABORTED;
      } else {  // a decode of one running request
        const size_t i = std::uniform_int_distribution<size_t>(0, rr.size() - 1)(rng);
        if (rr[i].status != RequestStatus::RUNNING) continue;
        rr[i].append_output_tokens(1);
        fr[i].append_output_tokens(1);
        BlockId b = kNullBlockId;
        const bool one = fast.allocate_one_new_block(fr[i], &b);
        const auto want = ref.allocate_slots(rr[i], {.num_new_tokens = 1});
        if (one) {
          ++one_block_calls;
          ASSERT_TRUE(want.has_value());
          ASSERT_EQ(block_ids(want), V{b});
        } else {
          ASSERT_EQ(block_ids(fast.allocate_slots(fr[i], {.num_new_tokens = 1})), block_ids(want));
          if (want) {
            ASSERT_NE(block_ids(want).size(), 1u) << "the one-block case was refused";
          }
        }
        if (want) {
          rr[i].num_computed_tokens += 1;
          fr[i].num_computed_tokens += 1;
        }
      }
      ASSERT_EQ(fast.block_pool().free_block_queue().get_all_free_blocks(),
                ref.block_pool().free_block_queue().get_all_free_blocks());
      ASSERT_EQ(fast.block_pool().num_cached_blocks(), ref.block_pool().num_cached_blocks());
      ASSERT_EQ(fast.padding_tokens(), ref.padding_tokens());
      ASSERT_EQ(fast.held_tokens(), ref.held_tokens());
      for (size_t i = 0; i < rr.size(); ++i) {
        ASSERT_EQ(table(fast, static_cast<int64_t>(i)), table(ref, static_cast<int64_t>(i)));
      }
      fast.check_invariants();
    }
    EXPECT_GT(one_block_calls, 0) << "round " << round;
  }
}

TEST(KVCacheManager, FailedAllocationChangesNothing) {
  KVCacheManager m({.num_gpu_blocks = 4, .block_size = 4, .max_model_len = 64});
  Request a = make_request(0, iota_tokens(8), 4);
  ASSERT_TRUE(admit(m, a));
  const auto before = m.block_pool().free_block_queue().get_all_free_blocks();
  Request b = make_request(1, iota_tokens(8, 50), 4);
  EXPECT_FALSE(admit(m, b));
  EXPECT_EQ(m.block_pool().free_block_queue().get_all_free_blocks(), before);
  EXPECT_TRUE(table(m, 1).empty());
  EXPECT_EQ(m.num_live_requests(), 1);
  m.check_invariants();
}

TEST(KVCacheManager, FullSequenceGateLooksAtTheWholePrompt) {
  KVCacheManager m({.num_gpu_blocks = 6, .block_size = 4, .max_model_len = 64});
  Request big = make_request(0, iota_tokens(24), 4);  // 6 blocks, only 5 usable
  AllocateSlotsArgs chunk{
      .num_new_tokens = 4, .full_sequence_must_fit = true, .has_scheduled_reqs = false};
  EXPECT_FALSE(m.allocate_slots(big, chunk));
  chunk.full_sequence_must_fit = false;  // --no-scheduler-reserve-full-isl: a first chunk fits
  EXPECT_EQ(block_ids(m.allocate_slots(big, chunk)), (V{1}));
}

TEST(KVCacheManager, OffByOneWhenMaxModelLenBlocksEqualPoolSize) {
  // cdiv(L, bs) == N: vLLM's start-up check passes, but only N-1 blocks are usable.
  KVCacheManager m({.num_gpu_blocks = 4, .block_size = 4, .max_model_len = 16});
  Request r = make_request(0, iota_tokens(16), 4);
  EXPECT_FALSE(admit(m, r));
  Request shorter = make_request(1, iota_tokens(12), 4);
  EXPECT_TRUE(admit(m, shorter));
}

TEST(KVCacheManager, WatermarkAppliesToWaitingRequestsWhenOthersRun) {
  KVCacheManager m({.num_gpu_blocks = 10, .block_size = 4, .max_model_len = 64, .watermark = 0.5});
  EXPECT_EQ(m.watermark_blocks(), 5);
  Request a = make_request(0, iota_tokens(16), 4);      // 4 blocks
  EXPECT_TRUE(admit(m, a, /*has_running=*/false));      // first admission never pays the watermark
  Request b = make_request(1, iota_tokens(4, 100), 4);  // 1 block; 5 free, 1 + 5 > 5
  EXPECT_FALSE(admit(m, b, /*has_running=*/true));
  EXPECT_TRUE(admit(m, b, /*has_running=*/false));
  // A running request never pays it.
  a.append_output_tokens(1);
  EXPECT_TRUE(m.allocate_slots(a, {.num_new_tokens = 1}));
}

TEST(KVCacheManager, LookaheadAndMaxModelLenCapSlots) {
  KVCacheManager m(
      {.num_gpu_blocks = 32, .block_size = 4, .max_model_len = 20, .enable_caching = false});
  Request r = make_request(0, iota_tokens(8), 4);
  auto out = m.allocate_slots(r, {.num_new_tokens = 8, .num_lookahead_tokens = 3});
  EXPECT_EQ(block_ids(out).size(), 3u);  // cdiv(8 + 3, 4)
  EXPECT_EQ(m.held_tokens(), 8);         // lookahead slots are padding, not held tokens
  EXPECT_EQ(m.padding_tokens(), 4);
  r.num_computed_tokens = 8;
  out = m.allocate_slots(r, {.num_new_tokens = 8, .num_lookahead_tokens = 8});
  EXPECT_EQ(table(m, 0).size(), 5u);  // min(16 + 8, L = 20) = 20 slots
}

TEST(KVCacheManager, FreeHitsConsumeCapacityWhenTouched) {
  KVCacheManager m({.num_gpu_blocks = 6, .block_size = 4, .max_model_len = 64});
  Request a = make_request(0, iota_tokens(13), 4);  // blocks 1..4, the first 3 cached
  ASSERT_TRUE(admit(m, a));
  m.free(a);
  EXPECT_EQ(m.block_pool().free_block_queue().get_all_free_blocks(), (V{4, 5, 3, 2, 1}));
  Request c = make_request(1, iota_tokens(8, 500), 4);  // takes the two unhashed blocks 4 and 5
  EXPECT_EQ(block_ids(admit(m, c)), (V{4, 5}));
  EXPECT_EQ(m.num_free_blocks(), 3);
  // b hits the 3 free cached blocks and needs 1 new block: touching the hits takes 3 of the 3
  // free blocks, so 1 + 3 > 3 and it must not fit (ignoring free hits would say 1 <= 3).
  Request b = make_request(2, iota_tokens(13), 4);
  ComputedBlocks hit = m.get_computed_blocks(b);
  EXPECT_EQ(hit.blocks, (V{1, 2, 3}));
  EXPECT_FALSE(admit(m, b, /*has_running=*/true));
  EXPECT_EQ(m.num_free_blocks(), 3);
  m.free(c);
  EXPECT_EQ(block_ids(admit(m, b, /*has_running=*/false)), (V{5}));
  EXPECT_EQ(table(m, 2), (V{1, 2, 3, 5}));
  EXPECT_EQ(m.num_free_blocks(), 1);
  m.check_invariants();
}

// vLLM 0.26.0 wheel: every lookup is recorded (admitted or not), a preempted request only under
// preempted_*, the others only under requests/queries/hits; caching off records nothing.
TEST(KVCacheManager, PrefixStatsRecordEveryLookupExclusively) {
  KVCacheManager m({.num_gpu_blocks = 8, .block_size = 4, .max_model_len = 64});
  Request a = make_request(0, iota_tokens(10), 4);
  ASSERT_TRUE(admit(m, a, /*has_running=*/false));  // caches blocks [0..3], [4..7]
  Request b = make_request(1, iota_tokens(10), 4);
  EXPECT_EQ(m.get_computed_blocks(b).num_computed_tokens, 8);  // 2 full blocks hit
  EXPECT_EQ(m.get_computed_blocks(b).num_computed_tokens, 8);  // a retry counts again
  b.num_preemptions = 1;
  EXPECT_EQ(m.get_computed_blocks(b).num_computed_tokens, 8);
  const PrefixCacheStats& s = m.prefix_cache_stats();
  EXPECT_EQ(s.requests, 3);  // a's lookup in admit() and b's two
  EXPECT_EQ(s.queries, 30);
  EXPECT_EQ(s.hits, 16);
  EXPECT_EQ(s.preempted_requests, 1);
  EXPECT_EQ(s.preempted_queries, 10);
  EXPECT_EQ(s.preempted_hits, 8);

  KVCacheManager off(
      {.num_gpu_blocks = 8, .block_size = 4, .max_model_len = 64, .enable_caching = false});
  off.get_computed_blocks(b);
  EXPECT_EQ(off.prefix_cache_stats().requests + off.prefix_cache_stats().preempted_requests, 0);
}

TEST(KVCacheManager, RejectsBadConfigAndZeroTokens) {
  EXPECT_THROW(KVCacheManager({.num_gpu_blocks = 8, .block_size = 0, .max_model_len = 8}),
               std::invalid_argument);
  EXPECT_THROW(
      KVCacheManager({.num_gpu_blocks = 8, .block_size = 4, .max_model_len = 8, .watermark = 1.0}),
      std::invalid_argument);
  KVCacheManager m({.num_gpu_blocks = 8, .block_size = 4, .max_model_len = 8});
  Request r = make_request(0, iota_tokens(4), 4);
  EXPECT_THROW(m.allocate_slots(r, {.num_new_tokens = 0}), std::invalid_argument);
}

}  // namespace
}  // namespace kvsim
