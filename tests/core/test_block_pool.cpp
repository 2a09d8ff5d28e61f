#include "kvsim/core/block_pool.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kvsim/core/block_hash.h"

namespace kvsim {
namespace {

using V = std::vector<BlockId>;

BlockHash h(uint64_t x) {
  return hash_block_unique(none_hash(), x, 0);
}

TEST(BlockPool, NullBlockAndInitialQueue) {
  BlockPool pool(6, true);
  EXPECT_EQ(pool.get_num_free_blocks(), 5);
  EXPECT_EQ(pool.free_block_queue().get_all_free_blocks(), (V{1, 2, 3, 4, 5}));
  EXPECT_DOUBLE_EQ(pool.get_usage(), 0.0);
  pool.check_invariants();
}

TEST(BlockPool, SingleBlockPoolHasNoUsableBlocks) {
  BlockPool pool(1, false);
  EXPECT_EQ(pool.get_num_free_blocks(), 0);
  EXPECT_DOUBLE_EQ(pool.get_usage(), 0.0);
  EXPECT_THROW(BlockPool(0, false), std::invalid_argument);
  // An absurd pool is refused before anything is allocated (not std::bad_alloc).
  try {
    BlockPool huge(BlockPool::kMaxNumGpuBlocks + 1, true);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds kvsim's limit of 134217728 blocks"),
              std::string::npos)
        << e.what();
  }
}

TEST(BlockPool, FreeBlocksPrependsUnhashedAppendsHashed) {
  BlockPool pool(10, true);
  V a;
  pool.get_new_blocks(4, a);
  EXPECT_EQ(a, (V{1, 2, 3, 4}));
  EXPECT_DOUBLE_EQ(pool.get_usage(), 4.0 / 9.0);
  // Blocks 1 and 2 are full and cached; 3 and 4 are not.
  pool.cache_full_blocks(V{1, 2}, std::vector<BlockHash>{h(1), h(2)});
  // A request frees its table in reverse order.
  pool.free_blocks(V{4, 3, 2, 1});
  EXPECT_EQ(pool.free_block_queue().get_all_free_blocks(), (V{4, 3, 5, 6, 7, 8, 9, 2, 1}));
  pool.check_invariants();
}

TEST(BlockPool, LazyEvictionAtPopAndHitsUnlinkFromTheMiddle) {
  BlockPool pool(4, true);
  V a;
  pool.get_new_blocks(3, a);  // 1, 2, 3
  pool.cache_full_blocks(V{1, 2, 3}, std::vector<BlockHash>{h(1), h(2), h(3)});
  pool.free_blocks(V{3, 2, 1});  // queue [3, 2, 1], all still cached
  EXPECT_EQ(pool.get_cached_block(h(2)), 2);
  pool.touch(V{2});  // hit re-references a free cached block
  EXPECT_EQ(pool.ref_cnt(2), 1);
  EXPECT_EQ(pool.free_block_queue().get_all_free_blocks(), (V{3, 1}));
  V b;
  pool.get_new_blocks(1, b);  // pops 3, evicting its hash
  EXPECT_EQ(b, (V{3}));
  EXPECT_FALSE(pool.get_cached_block(h(3)).has_value());
  EXPECT_EQ(pool.get_cached_block(h(1)), 1);
  EXPECT_EQ(pool.num_evictions(), 1);
  pool.check_invariants();
}

TEST(BlockPool, DuplicateKeysKeepInsertionOrder) {
  BlockPool pool(5, true);
  V a;
  pool.get_new_blocks(3, a);
  pool.cache_full_blocks(V{2}, std::vector<BlockHash>{h(7)});
  pool.cache_full_blocks(V{1}, std::vector<BlockHash>{h(7)});
  EXPECT_EQ(pool.get_cached_block(h(7)), 2);  // first inserted wins
  pool.free_blocks(V{2});
  V b;
  pool.get_new_blocks(2, b);  // 4, then 2 (evicted: 1 becomes the lookup result)
  EXPECT_EQ(b, (V{4, 2}));
  EXPECT_EQ(pool.get_cached_block(h(7)), 1);
  pool.check_invariants();
}

// Three blocks under one key: evicting the middle one, then the last inserted one, keeps the
// first inserted as the lookup result; evicting it hands the key to the survivor.
TEST(BlockPool, SharedKeyChainSurvivesEvictionAnywhere) {
  BlockPool pool(6, true);
  V a;
  pool.get_new_blocks(5, a);  // 1..5
  pool.cache_full_blocks(V{3, 1, 4}, std::vector<BlockHash>{h(9), h(9), h(9)});
  EXPECT_EQ(pool.num_cached_blocks(), 3);
  EXPECT_EQ(pool.get_cached_block(h(9)), 3);
  pool.free_blocks(V{1, 4});  // both hashed: appended [1, 4]
  EXPECT_EQ(pool.free_block_queue().get_all_free_blocks(), (V{1, 4}));
  V b;
  pool.get_new_blocks(1, b);  // pops 1: the middle of the chain 3 -> 1 -> 4
  EXPECT_EQ(b, (V{1}));
  EXPECT_EQ(pool.get_cached_block(h(9)), 3);
  pool.check_invariants();
  pool.get_new_blocks(1, b);  // pops 4: the last inserted
  EXPECT_EQ(pool.get_cached_block(h(9)), 3);
  pool.check_invariants();
  pool.cache_full_blocks(V{2}, std::vector<BlockHash>{h(9)});  // chain 3 -> 2
  pool.free_blocks(V{3});
  V c;
  pool.get_new_blocks(1, c);  // pops 3: the first inserted; 2 answers now
  EXPECT_EQ(c, (V{3}));
  EXPECT_EQ(pool.get_cached_block(h(9)), 2);
  EXPECT_EQ(pool.num_evictions(), 3);
  pool.check_invariants();
}

// Many cache/evict laps over a pool larger than the map's first capacity: the map grows and
// rebuilds (dropping tombstones) many times, and every lookup stays right.
TEST(BlockPool, PrefixMapRebuildsKeepEveryEntry) {
  constexpr int32_t kN = 3000;
  BlockPool pool(kN, true);
  uint64_t next = 1;
  for (int lap = 0; lap < 12; ++lap) {
    V got;
    pool.get_new_blocks(kN - 1, got);
    std::vector<BlockHash> keys;
    for (size_t i = 0; i < got.size(); ++i) keys.push_back(h(next + i));
    pool.cache_full_blocks(got, keys);
    for (size_t i = 0; i < got.size(); i += 97) EXPECT_EQ(pool.get_cached_block(keys[i]), got[i]);
    EXPECT_FALSE(pool.get_cached_block(h(next - 1)).has_value());  // evicted in this lap
    pool.free_blocks(got);
    next += got.size();
    if (lap % 4 == 3) pool.check_invariants();
  }
  EXPECT_EQ(pool.num_cached_blocks(), kN - 1);
  EXPECT_EQ(pool.num_evictions(), 11 * int64_t{kN - 1});
}

TEST(BlockPool, CachingOffIsAStack) {
  BlockPool pool(8, false);
  V a;
  pool.get_new_blocks(3, a);
  pool.cache_full_blocks(V{1}, std::vector<BlockHash>{h(1)});  // ignored when caching is off
  EXPECT_FALSE(pool.is_cached(1));
  pool.free_blocks(V{3, 2, 1});
  V b;
  pool.get_new_blocks(2, b);
  EXPECT_EQ(b, (V{3, 2}));  // LIFO reuse: the request's last block comes back first
  pool.check_invariants();
}

TEST(BlockPool, ResetPrefixCacheOnlyWhenIdle) {
  BlockPool pool(4, true);
  V a;
  pool.get_new_blocks(1, a);
  pool.cache_full_blocks(a, std::vector<BlockHash>{h(1)});
  EXPECT_FALSE(pool.reset_prefix_cache());
  EXPECT_TRUE(pool.get_cached_block(h(1)).has_value());
  pool.free_blocks(a);
  EXPECT_TRUE(pool.reset_prefix_cache());
  EXPECT_FALSE(pool.get_cached_block(h(1)).has_value());
  EXPECT_EQ(pool.num_cached_blocks(), 0);
  pool.check_invariants();
}

TEST(BlockPool, OverAllocationThrows) {
  BlockPool pool(3, true);
  V a;
  EXPECT_THROW(pool.get_new_blocks(3, a), std::logic_error);
  EXPECT_TRUE(a.empty());
}

}  // namespace
}  // namespace kvsim
