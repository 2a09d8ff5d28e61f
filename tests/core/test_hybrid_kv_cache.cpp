// Hybrid KV cache (issue 9): KVCacheManager over a KVCacheCoordinator with full-attention,
// sliding-window and chunked-local groups sharing one BlockPool.
//
// The worked examples' expected block ids were derived step by step from vLLM 0.26.0's
// KVCacheManager (kv_cache_manager.py, kv_cache_coordinator.py, single_type_kv_cache_manager.py)
// and confirmed by running the wheel's KVCacheManager on the same calls (block size 16, sha256
// hashes, max_in_flight_tokens 64). The randomized test checks the invariants (C1..C3, M5, G1)
// after every operation. KVSIM_PROPERTY_OPS scales it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "kvsim/core/kv_cache_manager.h"
#include "kvsim/core/kv_cache_spec.h"

#include "kv_cache_spec_fixture.h"
#include "property_ops.h"

namespace kvsim {
namespace {

using core_test::kBs;
using core_test::spec;

KVCacheManagerConfig config(std::vector<KVCacheSpec> specs, int32_t num_blocks, bool caching,
                            int32_t max_model_len = 1000) {
  KVCacheManagerConfig c;
  c.num_gpu_blocks = num_blocks;
  c.block_size = kBs;
  c.max_model_len = max_model_len;
  c.enable_caching = caching;
  c.max_in_flight_tokens = 64;
  c.kv_cache_config.num_blocks = num_blocks;
  for (size_t g = 0; g < specs.size(); ++g) {
    c.kv_cache_config.kv_cache_groups.push_back({{static_cast<int32_t>(g)}, specs[g]});
  }
  return c;
}

std::unique_ptr<Request> request(int64_t id, std::vector<int32_t> tokens, bool caching) {
  auto r = std::make_unique<Request>();
  r->request_id = id;
  r->num_prompt_tokens = static_cast<int32_t>(tokens.size());
  r->max_tokens = 100;
  r->content.token_ids = std::make_shared<const std::vector<int32_t>>(std::move(tokens));
  r->content.salt = static_cast<uint64_t>(id) + 1;
  if (caching) r->enable_block_hashing(kBs);
  return r;
}

std::vector<int32_t> range(int32_t first, int32_t count) {
  std::vector<int32_t> v(static_cast<size_t>(count));
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<BlockId> ids(std::span<const BlockId> s) {
  return {s.begin(), s.end()};
}

// Group g's new ids from the last allocate_slots() result.
std::vector<BlockId> new_ids(const KVCacheManager& m, std::span<const BlockId> all, size_t g) {
  const auto ends = m.new_block_group_ends();
  const size_t begin = g == 0 ? 0 : static_cast<size_t>(ends[g - 1]);
  return {all.begin() + static_cast<std::ptrdiff_t>(begin),
          all.begin() + static_cast<std::ptrdiff_t>(ends[g])};
}

TEST(HybridKVCache, SlidingWindowBlocksLeaveTheWindowAndAreReused) {
  // Full + sliding window 32, caching off, 19 usable blocks.
  KVCacheManager m(
      config({spec(KVCacheSpecKind::kFullAttention), spec(KVCacheSpecKind::kSlidingWindow, 32)}, 20,
             false));
  ASSERT_EQ(m.num_kv_cache_groups(), 2u);
  auto a = request(0, range(0, 64), false);
  auto got = m.allocate_slots(*a, {.num_new_tokens = 64});
  ASSERT_TRUE(got);
  EXPECT_EQ(new_ids(m, *got, 0), (std::vector<BlockId>{1, 2, 3, 4}));
  EXPECT_EQ(new_ids(m, *got, 1), (std::vector<BlockId>{5, 6, 7, 8}));
  EXPECT_EQ(m.num_free_blocks(), 11);
  a->num_computed_tokens = 64;
  a->status = RequestStatus::RUNNING;
  a->append_output_tokens(1);
  // 64 processed tokens: the next token's window starts at token 33, so blocks #0 and #1 of the
  // window group are skipped: freed last-first ([6, 5] prepended) and reused at once.
  got = m.allocate_slots(*a, {.num_new_tokens = 1});
  ASSERT_TRUE(got);
  EXPECT_EQ(new_ids(m, *got, 0), (std::vector<BlockId>{6}));
  EXPECT_EQ(new_ids(m, *got, 1), (std::vector<BlockId>{5}));
  EXPECT_EQ(ids(m.get_block_ids(0, 0)), (std::vector<BlockId>{1, 2, 3, 4, 6}));
  EXPECT_EQ(ids(m.get_block_ids(0, 1)), (std::vector<BlockId>{0, 0, 7, 8, 5}));
  EXPECT_EQ(m.num_free_blocks(), 11);
  EXPECT_EQ(m.num_skipped_blocks_freed(), 2);
  EXPECT_EQ(m.num_blocks_held(0), 8);
  EXPECT_EQ(m.num_held_blocks_in_group(1), 3);
  // Both groups: 5 blocks for 65 tokens; the nulls stand for skipped tokens.
  EXPECT_EQ(m.padding_tokens(0), 15);
  EXPECT_EQ(m.padding_tokens(1), 15);
  EXPECT_EQ(m.padding_tokens(), 30);
  m.check_invariants();
  m.free(*a);
  EXPECT_EQ(m.num_free_blocks(), 19);
  m.check_invariants();
}

TEST(HybridKVCache, SlidingWindowPrefixHitNeedsOnlyTheWindow) {
  KVCacheManager m(
      config({spec(KVCacheSpecKind::kFullAttention), spec(KVCacheSpecKind::kSlidingWindow, 32)}, 20,
             true));
  auto a = request(0, range(0, 96), true);
  EXPECT_EQ(m.get_computed_blocks(*a).num_computed_tokens, 0);
  auto got = m.allocate_slots(*a, {.num_new_tokens = 96});
  ASSERT_TRUE(got);
  EXPECT_EQ(new_ids(m, *got, 1), (std::vector<BlockId>{7, 8, 9, 10, 11, 12}));
  a->num_computed_tokens = 96;
  m.free(*a);
  // Group by group, each table reversed; all blocks are hashed, so appended.
  EXPECT_EQ(
      m.block_pool().free_block_queue().get_all_free_blocks(),
      (std::vector<BlockId>{13, 14, 15, 16, 17, 18, 19, 6, 5, 4, 3, 2, 1, 12, 11, 10, 9, 8, 7}));
  std::vector<int32_t> t = range(0, 96);
  const std::vector<int32_t> tail = range(5000, 20);
  t.insert(t.end(), tail.begin(), tail.end());
  auto b = request(1, t, true);
  const ComputedBlocks hit = m.get_computed_blocks(*b);
  // The window group needs cdiv(W - 1, 16) = 2 cached blocks before the hit end; the rest null.
  EXPECT_EQ(hit.num_computed_tokens, 96);
  ASSERT_EQ(hit.group_blocks.size(), 2u);
  EXPECT_EQ(hit.group_blocks[0], (std::vector<BlockId>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(hit.group_blocks[1], (std::vector<BlockId>{0, 0, 0, 0, 11, 12}));
  AllocateSlotsArgs args;
  args.num_new_tokens = 20;
  args.num_new_computed_tokens = hit.num_computed_tokens;
  args.new_computed_group_blocks = hit.group_blocks;
  args.full_sequence_must_fit = true;
  got = m.allocate_slots(*b, args);
  ASSERT_TRUE(got);
  EXPECT_EQ(new_ids(m, *got, 0), (std::vector<BlockId>{13, 14}));
  EXPECT_EQ(new_ids(m, *got, 1), (std::vector<BlockId>{15, 16}));
  EXPECT_EQ(ids(m.get_block_ids(1, 0)), (std::vector<BlockId>{1, 2, 3, 4, 5, 6, 13, 14}));
  EXPECT_EQ(ids(m.get_block_ids(1, 1)), (std::vector<BlockId>{0, 0, 0, 0, 11, 12, 15, 16}));
  EXPECT_EQ(m.num_free_blocks(), 7);
  m.check_invariants();
}

TEST(HybridKVCache, ChunkedLocalAttentionKeepsOnlyTheCurrentChunk) {
  KVCacheManager m(config(
      {spec(KVCacheSpecKind::kFullAttention), spec(KVCacheSpecKind::kChunkedLocalAttention, 32)},
      20, true));
  auto a = request(0, range(0, 70), true);
  auto got = m.allocate_slots(*a, {.num_new_tokens = 40});
  ASSERT_TRUE(got);
  EXPECT_EQ(new_ids(m, *got, 0), (std::vector<BlockId>{1, 2, 3}));
  EXPECT_EQ(new_ids(m, *got, 1), (std::vector<BlockId>{4, 5, 6}));
  a->num_computed_tokens = 40;
  a->status = RequestStatus::RUNNING;
  // 40 computed: chunk 0 (tokens 0..31) is skipped; its cached blocks go to the tail.
  got = m.allocate_slots(*a, {.num_new_tokens = 30});
  ASSERT_TRUE(got);
  EXPECT_EQ(new_ids(m, *got, 0), (std::vector<BlockId>{7, 8}));
  EXPECT_EQ(new_ids(m, *got, 1), (std::vector<BlockId>{9, 10}));
  EXPECT_EQ(ids(m.get_block_ids(0, 1)), (std::vector<BlockId>{0, 0, 6, 9, 10}));
  EXPECT_EQ(m.num_free_blocks(), 11);
  a->num_computed_tokens = 70;
  m.free(*a);
  EXPECT_EQ(
      m.block_pool().free_block_queue().get_all_free_blocks(),
      (std::vector<BlockId>{10, 8, 11, 12, 13, 14, 15, 16, 17, 18, 19, 5, 4, 7, 3, 2, 1, 9, 6}));
  auto b = request(1, range(0, 70), true);
  const ComputedBlocks hit = m.get_computed_blocks(*b);
  // Positions before the chunk of token 64 are outside every window: null, computed for free.
  EXPECT_EQ(hit.num_computed_tokens, 64);
  EXPECT_EQ(hit.group_blocks[0], (std::vector<BlockId>{1, 2, 3, 7}));
  EXPECT_EQ(hit.group_blocks[1], (std::vector<BlockId>{0, 0, 0, 0}));
  AllocateSlotsArgs args;
  args.num_new_tokens = 6;
  args.num_new_computed_tokens = 64;
  args.new_computed_group_blocks = hit.group_blocks;
  args.full_sequence_must_fit = true;
  got = m.allocate_slots(*b, args);
  ASSERT_TRUE(got);
  EXPECT_EQ(new_ids(m, *got, 0), (std::vector<BlockId>{10}));
  EXPECT_EQ(new_ids(m, *got, 1), (std::vector<BlockId>{8}));
  EXPECT_EQ(ids(m.get_block_ids(1, 1)), (std::vector<BlockId>{0, 0, 0, 0, 8}));
  EXPECT_EQ(m.num_free_blocks(), 13);
  m.check_invariants();
}

TEST(HybridKVCache, AdmissionCapsTheWindowGroupsReservation) {
  // One sliding-window group: the gate asks for min(cdiv(400, 16), cdiv(31 + 64, 16) + 1) = 7
  // blocks, not 25, so a 400-token prompt is admitted into 19 usable blocks.
  KVCacheManager m(config({spec(KVCacheSpecKind::kSlidingWindow, 32)}, 20, false));
  EXPECT_EQ(m.max_blocks_for_sequence(400), 7);
  auto c = request(2, range(0, 400), false);
  auto got = m.allocate_slots(*c, {.num_new_tokens = 64, .full_sequence_must_fit = true});
  ASSERT_TRUE(got);
  EXPECT_EQ(ids(*got), (std::vector<BlockId>{1, 2, 3, 4}));
  EXPECT_EQ(m.num_free_blocks(), 15);
  // Chunked prefill of the whole prompt: the held blocks stay bounded by the window.
  c->num_computed_tokens = 64;
  c->status = RequestStatus::RUNNING;
  while (c->num_computed_tokens < 400) {
    const int32_t n = std::min(64, 400 - c->num_computed_tokens);
    ASSERT_TRUE(m.allocate_slots(*c, {.num_new_tokens = n}));
    c->num_computed_tokens += n;
    EXPECT_LE(m.num_blocks_held(2), 7);
    m.check_invariants();
  }
}

TEST(HybridKVCache, SingleFullGroupConfigUsesTheSpecialisedPath) {
  KVCacheManager m(config({spec(KVCacheSpecKind::kFullAttention)}, 20, true));
  EXPECT_EQ(m.coordinator(), nullptr);
  EXPECT_EQ(m.num_kv_cache_groups(), 1u);
  EXPECT_EQ(m.max_blocks_for_sequence(400), 25);
}

TEST(HybridKVCache, RejectsAConfigThatDisagreesWithThePool) {
  KVCacheManagerConfig c = config(
      {spec(KVCacheSpecKind::kFullAttention), spec(KVCacheSpecKind::kSlidingWindow, 32)}, 20, true);
  c.num_gpu_blocks = 21;
  EXPECT_THROW(KVCacheManager{c}, std::invalid_argument);
}

// Random admissions (with shared prefixes, so hits), chunked prefills, decodes, in-flight
// tokens and frees on hybrid layouts; every invariant checked after every operation. Each
// layout runs with the prefix-cache retention intervals it accepts: -1 (dense), 0 (sparse) and,
// with a sliding-window group, a positive one; the junction is stored at each lookup as the
// scheduler does.
void run_random_traffic(const std::vector<KVCacheSpec>& specs, bool caching, uint64_t seed,
                        int32_t retention_interval) {
  const int64_t ops = scaled_ops(6000);
  constexpr int32_t kL = 400;
  KVCacheManagerConfig c = config(specs, 60, caching, kL);
  c.prefix_cache_retention_interval = retention_interval;
  KVCacheManager m(c);
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> prefixes;
  for (int p = 0; p < 4; ++p) prefixes.push_back(range(p * 10000, 160));
  std::vector<std::unique_ptr<Request>> live;
  int64_t next_id = 0;
  int64_t hits = 0;
  int64_t junctions = 0;
  for (int64_t op = 0; op < ops; ++op) {
    const int kind = static_cast<int>(rng() % 8);
    if (kind < 3 || live.empty()) {
      const auto& pre = prefixes[rng() % prefixes.size()];
      std::vector<int32_t> t(pre.begin(), pre.begin() + static_cast<long>(rng() % pre.size()));
      const size_t extra = 1 + rng() % 60;
      for (size_t i = 0; i < extra; ++i) t.push_back(static_cast<int32_t>(100000 + rng() % 1000));
      auto r = request(next_id++, std::move(t), caching);
      ComputedBlocks hit = m.get_computed_blocks(*r);
      r->shared_prefix_boundary = hit.shared_prefix_boundary;
      junctions += hit.shared_prefix_boundary > 0 ? 1 : 0;
      hits += hit.num_computed_tokens;
      AllocateSlotsArgs a;
      a.num_new_tokens = std::min<int32_t>(r->num_tokens() - hit.num_computed_tokens,
                                           1 + static_cast<int32_t>(rng() % 64));
      a.num_new_computed_tokens = hit.num_computed_tokens;
      a.new_computed_group_blocks = hit.group_blocks;
      a.full_sequence_must_fit = rng() % 2 == 0;
      a.has_scheduled_reqs = !live.empty();
      if (m.allocate_slots(*r, a)) {
        r->num_computed_tokens = hit.num_computed_tokens + a.num_new_tokens;
        r->status = RequestStatus::RUNNING;
        live.push_back(std::move(r));
      }
    } else if (kind < 7) {
      Request& r = *live[rng() % live.size()];
      // Settle the previous step's tokens, sometimes leaving them in flight (async).
      if (rng() % 2 == 0) r.num_in_flight_tokens = 0;
      if (r.num_computed_tokens >= r.num_tokens()) r.append_output_tokens(1);
      const int32_t remaining = r.num_tokens() - r.num_computed_tokens;
      const int32_t n = std::min<int32_t>(remaining, 1 + static_cast<int32_t>(rng() % 48));
      if (r.num_computed_tokens + n >= kL) continue;
      if (m.allocate_slots(r, {.num_new_tokens = n})) {
        r.num_computed_tokens += n;
        r.num_in_flight_tokens = n;
      }
    } else {
      const size_t i = rng() % live.size();
      m.free(*live[i]);
      live[i] = std::move(live.back());
      live.pop_back();
    }
    ASSERT_NO_THROW(m.check_invariants()) << "op " << op;
  }
  for (auto& r : live) m.free(*r);
  m.check_invariants();
  EXPECT_EQ(m.num_free_blocks(), 59);
  EXPECT_GT(m.num_skipped_blocks_freed(), 0);
  if (caching) {
    EXPECT_GT(hits, 0);
    EXPECT_GT(junctions, 0);
  }
}

// Positive intervals: 64 and 96 tokens (4 and 6 blocks) exceed the windows' need (3 blocks for
// W = 48 and 40), 128 (8 blocks) that of W = 64 (4 blocks), so all are sparse. 0: no positive
// one (the layout has no sliding-window group).
void run_random_traffic_all_intervals(const std::vector<KVCacheSpec>& specs, bool caching,
                                      uint64_t seed, int32_t positive_interval) {
  std::vector<int32_t> intervals{-1, 0};
  if (positive_interval > 0) intervals.push_back(positive_interval);
  for (int32_t r : intervals) {
    SCOPED_TRACE(testing::Message() << "prefix_cache_retention_interval " << r);
    run_random_traffic(specs, caching, seed, r);
    if (testing::Test::HasFatalFailure()) return;
  }
}

TEST(HybridKVCacheProperties, FullPlusSlidingWindowWithCaching) {
  run_random_traffic_all_intervals(
      {spec(KVCacheSpecKind::kFullAttention), spec(KVCacheSpecKind::kSlidingWindow, 48)}, true, 1,
      64);
}

TEST(HybridKVCacheProperties, GemmaLikeFiveWindowGroupsWithoutCaching) {
  std::vector<KVCacheSpec> s{spec(KVCacheSpecKind::kFullAttention)};
  for (int i = 0; i < 5; ++i) s.push_back(spec(KVCacheSpecKind::kSlidingWindow, 64));
  run_random_traffic_all_intervals(s, false, 2, 128);
}

TEST(HybridKVCacheProperties, GemmaLikeFiveWindowGroupsWithCaching) {
  std::vector<KVCacheSpec> s;
  for (int i = 0; i < 3; ++i) s.push_back(spec(KVCacheSpecKind::kSlidingWindow, 64));
  s.push_back(spec(KVCacheSpecKind::kFullAttention));
  run_random_traffic_all_intervals(s, true, 3, 128);
}

TEST(HybridKVCacheProperties, ChunkedLocalPlusFullWithCaching) {
  // No sliding-window group: a positive interval is refused (test_sliding_window_retention).
  run_random_traffic_all_intervals(
      {spec(KVCacheSpecKind::kChunkedLocalAttention, 64), spec(KVCacheSpecKind::kFullAttention)},
      true, 4, 0);
}

TEST(HybridKVCacheProperties, ThreeKindsWithCaching) {
  run_random_traffic_all_intervals(
      {spec(KVCacheSpecKind::kFullAttention), spec(KVCacheSpecKind::kSlidingWindow, 40),
       spec(KVCacheSpecKind::kChunkedLocalAttention, 64)},
      true, 5, 96);
}

}  // namespace
}  // namespace kvsim
