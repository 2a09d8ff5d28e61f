// Request::enable_block_hashing(bs, /*defer_private=*/true): private (salted) block hashes are
// counted but not computed until materialize_block_hashes(); the chain they then form is the one
// eager hashing computes. BlockPool caches such blocks without a hash and takes it when they are
// published; KVCacheManager refuses to publish a request whose hashes are still deferred.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "kvsim/core/block_pool.h"
#include "kvsim/core/kv_cache_manager.h"
#include "kvsim/core/request.h"

namespace kvsim {
namespace {

Request make(int32_t prompt, int32_t shared_tokens, uint64_t salt) {
  Request r;
  r.num_prompt_tokens = prompt;
  r.max_tokens = 1000;
  r.content.salt = salt;
  if (shared_tokens > 0) {
    auto toks = std::make_shared<std::vector<int32_t>>();
    for (int32_t i = 0; i < shared_tokens; ++i) toks->push_back(i % 7);
    r.content.token_ids = toks;
  }
  return r;
}

TEST(DeferredBlockHashes, MaterializedChainEqualsEagerHashingAtEveryLength) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const int32_t bs = std::uniform_int_distribution<int32_t>(1, 16)(rng);
    const int32_t prompt = std::uniform_int_distribution<int32_t>(0, 100)(rng);
    const int32_t shared = std::uniform_int_distribution<int32_t>(0, prompt)(rng);
    Request eager = make(prompt, shared, 42);
    Request lazy = make(prompt, shared, 42);
    eager.enable_block_hashing(bs);
    lazy.enable_block_hashing(bs, true);
    const int steps = std::uniform_int_distribution<int>(0, 120)(rng);
    for (int k = 0; k < steps; ++k) {
      // One token a step, or (odd trials) several at once, as a lazy member's settle does:
      // one update may complete several blocks.
      const int32_t n =
          trial % 2 == 0 ? 1 : std::uniform_int_distribution<int32_t>(1, 2 * bs + 1)(rng);
      eager.append_output_tokens(n);
      lazy.append_output_tokens(n);
      ASSERT_EQ(eager.num_block_hashes(), lazy.num_block_hashes());
      ASSERT_EQ(eager.next_block_hash_tokens, lazy.next_block_hash_tokens);
      ASSERT_EQ(eager.first_private_block_hash, lazy.first_private_block_hash);
      // Hashes with content are never deferred; every deferred one is private.
      ASSERT_LE(static_cast<int64_t>(lazy.block_hashes.size()),
                static_cast<int64_t>(eager.block_hashes.size()));
      ASSERT_TRUE(lazy.num_deferred_block_hashes == 0 ||
                  static_cast<int32_t>(lazy.block_hashes.size()) >= lazy.first_private_block_hash);
      if (k % 17 == 5) lazy.materialize_block_hashes();  // and hashing goes on after it
    }
    lazy.materialize_block_hashes();
    EXPECT_EQ(lazy.num_deferred_block_hashes, 0);
    EXPECT_EQ(eager.block_hashes, lazy.block_hashes) << "trial " << trial;
  }
}

TEST(DeferredBlockHashes, PoolCachesWithoutTheHashAndTakesItOnPublish) {
  BlockPool pool(8, true);
  std::vector<BlockId> got;
  pool.get_new_blocks(2, got);
  pool.cache_private_blocks(got);
  pool.check_invariants();
  EXPECT_TRUE(pool.is_cached(got[0]));
  EXPECT_TRUE(pool.is_private(got[0]));
  EXPECT_FALSE(pool.block_hash(got[0]).has_value());
  EXPECT_EQ(pool.num_cached_blocks(), 2);
  EXPECT_THROW(pool.publish_private_blocks(got), std::logic_error);
  const std::vector<BlockHash> hs{{1, 2}, {3, 4}};
  pool.publish_private_blocks(got, hs);
  pool.check_invariants();
  EXPECT_EQ(pool.get_cached_block(hs[1]), got[1]);
  EXPECT_EQ(pool.block_hash(got[0]), hs[0]);
  // Evicting one that was never published: counted, nothing to erase.
  BlockPool p2(3, true);
  std::vector<BlockId> b;
  p2.get_new_blocks(2, b);
  p2.cache_private_blocks(std::span<const BlockId>(b.data(), 1));
  p2.free_blocks(b);
  std::vector<BlockId> again;
  p2.get_new_blocks(2, again);
  EXPECT_EQ(p2.num_evictions(), 1);
  EXPECT_EQ(p2.num_cached_blocks(), 0);
  p2.check_invariants();
}

TEST(DeferredBlockHashes, ManagerPublishesOnlyMaterializedHashes) {
  KVCacheManagerConfig c;
  c.num_gpu_blocks = 32;
  c.block_size = 4;
  c.max_model_len = 64;
  c.defer_private_block_hashes = true;
  KVCacheManager kv(c);
  Request r = make(10, 0, 9);
  r.request_id = 0;
  r.enable_block_hashing(4, true);
  EXPECT_EQ(r.num_block_hashes(), 2);
  EXPECT_TRUE(r.block_hashes.empty());
  AllocateSlotsArgs args;
  args.num_new_tokens = 10;
  ASSERT_TRUE(kv.allocate_slots(r, args).has_value());
  r.status = RequestStatus::RUNNING;
  r.num_computed_tokens = 10;
  kv.check_invariants();
  EXPECT_EQ(kv.block_pool().num_cached_blocks(), 2);
  // A preemption publishes: the deferred hashes must be computed first.
  EXPECT_THROW(kv.free(r), std::logic_error);
  r.materialize_block_hashes();
  const std::vector<BlockId> table(kv.get_block_ids(0).begin(), kv.get_block_ids(0).end());
  kv.free(r);
  kv.check_invariants();
  EXPECT_EQ(kv.block_pool().get_cached_block(r.block_hashes[0]), table[0]);
  EXPECT_EQ(kv.block_pool().get_cached_block(r.block_hashes[1]), table[1]);
  // The lookup after re-admission finds its own blocks (capped at num_tokens - 1).
  r.status = RequestStatus::PREEMPTED;
  r.num_computed_tokens = 0;
  r.num_preemptions = 1;
  const ComputedBlocks hits = kv.get_computed_blocks(r);
  EXPECT_EQ(hits.num_computed_tokens, 8);
}

}  // namespace
}  // namespace kvsim
