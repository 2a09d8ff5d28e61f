// The batched stack allocators against core's BlockPool with caching off (vLLM 0.26: LIFO).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kvsim/core/block_pool.h"
#include "kvsim/cuda/block_allocator.h"
#include "kvsim/cuda/kv_backends.h"

namespace kvsim {
namespace {

// Random batched allocate/free rounds; every id and the free order must equal BlockPool's.
template <class Allocator>
void run_against_block_pool(Allocator& alloc, int32_t num_blocks, int rounds, uint64_t seed) {
  BlockPool pool(num_blocks, /*enable_caching=*/false);
  std::mt19937_64 rng(seed);
  std::vector<std::vector<BlockId>> live;
  for (int round = 0; round < rounds; ++round) {
    std::vector<int32_t> demands(1 + rng() % 40);
    for (auto& d : demands) d = static_cast<int32_t>(rng() % 6);
    int64_t total = 0;
    for (int32_t d : demands) total += d;
    std::vector<int32_t> offsets;
    std::vector<BlockId> ids;
    const bool ok = alloc.allocate(demands, offsets, ids);
    ASSERT_EQ(ok, total <= pool.get_num_free_blocks()) << "round " << round;
    if (ok) {
      ASSERT_EQ(offsets.size(), demands.size() + 1);
      for (size_t i = 0; i < demands.size(); ++i) {
        std::vector<BlockId> want;
        pool.get_new_blocks(demands[i], want);
        const std::vector<BlockId> got(ids.begin() + offsets[i], ids.begin() + offsets[i + 1]);
        ASSERT_EQ(got, want) << "round " << round << " request " << i;
        if (!got.empty()) live.push_back(got);
      }
    }
    // Free a random subset of live requests, each in reverse table order (KVCacheManager::free),
    // as one batch.
    std::vector<BlockId> batch;
    for (auto it = live.begin(); it != live.end();) {
      if (rng() % 3 == 0 || !ok) {
        batch.insert(batch.end(), it->rbegin(), it->rend());
        it = live.erase(it);
      } else {
        ++it;
      }
    }
    alloc.free(batch);
    pool.free_blocks(batch);
    ASSERT_EQ(alloc.num_free(), pool.get_num_free_blocks());
    ASSERT_EQ(alloc.free_ids_top_first(), pool.free_block_queue().get_all_free_blocks())
        << "round " << round;
  }
}

TEST(HostBlockAllocator, MatchesBlockPoolWithCachingOff) {
  HostBlockAllocator alloc(257);
  run_against_block_pool(alloc, 257, 400, 1);
}

TEST(HostBlockAllocator, StartsLikeTheFreeQueueAndRefusesCleanly) {
  HostBlockAllocator alloc(5);
  EXPECT_EQ(alloc.free_ids_top_first(), (std::vector<BlockId>{1, 2, 3, 4}));
  std::vector<int32_t> offsets;
  std::vector<BlockId> ids;
  const std::vector<int32_t> too_many = {3, 2};
  EXPECT_FALSE(alloc.allocate(too_many, offsets, ids));
  EXPECT_EQ(alloc.num_free(), 4);
  const std::vector<int32_t> fits = {1, 0, 2};
  ASSERT_TRUE(alloc.allocate(fits, offsets, ids));
  EXPECT_EQ(offsets, (std::vector<int32_t>{0, 1, 1, 3}));
  EXPECT_EQ(ids, (std::vector<BlockId>{1, 2, 3}));
  const std::vector<BlockId> bad = {0};
  EXPECT_THROW(alloc.free(bad), std::invalid_argument);
  const std::vector<BlockId> overflow = {1, 2, 3, 4};
  EXPECT_THROW(alloc.free(overflow), std::invalid_argument);
  const std::vector<int32_t> negative = {-1};
  EXPECT_THROW(alloc.allocate(negative, offsets, ids), std::invalid_argument);
}

TEST(GpuBlockAllocator, MatchesBlockPoolWithCachingOff) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  GpuBlockAllocator alloc(257);
  run_against_block_pool(alloc, 257, 200, 2);
}

TEST(GpuBlockAllocator, LargeBatchMatchesHostTwin) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  // More requests than one CTA tile (1024), so the carried scan is exercised.
  const int32_t n = 5000;
  HostBlockAllocator host(40001);
  GpuBlockAllocator gpu(40001);
  std::vector<int32_t> demands(n);
  for (int32_t i = 0; i < n; ++i) demands[static_cast<size_t>(i)] = (i * 7) % 13;
  std::vector<int32_t> ho, go;
  std::vector<BlockId> hi, gi;
  ASSERT_TRUE(host.allocate(demands, ho, hi));
  ASSERT_TRUE(gpu.allocate(demands, go, gi));
  EXPECT_EQ(ho, go);
  EXPECT_EQ(hi, gi);
  host.free(hi);
  gpu.free(gi);
  EXPECT_EQ(host.free_ids_top_first(), gpu.free_ids_top_first());
}

TEST(GpuBlockAllocator, RefusesWithoutCuda) {
  if (cuda_device_count() != 0) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_THROW(GpuBlockAllocator(16), std::runtime_error);
}

}  // namespace
}  // namespace kvsim
