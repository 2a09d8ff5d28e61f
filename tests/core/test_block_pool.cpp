#include "kvsim/core/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <random>
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

// free_blocks takes a fused one-pass path when every listed block drops from 1 to 0 and none is
// the null block or hashed, and otherwise undoes it and runs the general loop. Random traffic
// that hits both sides of that split (shared blocks via touch, the null block, hashed and
// unhashed mixes in either order, a shared block listed twice, tombstones from touching free
// blocks), against the vLLM rule written out as a list: decrement in the given order; a block
// reaching 0 (not null) goes to the head if unhashed, the tail if hashed, each group in order.
void run_free_paths_against_list(bool caching, uint64_t seed) {
  constexpr int32_t kN = 40;
  BlockPool pool(kN, caching);
  std::list<BlockId> queue;
  std::vector<int32_t> ref(kN, 0);
  std::vector<bool> hashed(kN, false);
  for (BlockId b = 1; b < kN; ++b) queue.push_back(b);
  std::mt19937_64 rng(seed);
  std::vector<V> holders;
  uint64_t next_key = 1;
  int64_t fast_shaped = 0;  // frees that the fast path can take whole
  int64_t held_frees = 0;   // frees through free_held_blocks
  int64_t table_frees = 0;  // frees through free_table_blocks
  for (int op = 0; op < 60000; ++op) {
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 3) {  // allocate
      const int free = pool.get_num_free_blocks();
      if (free == 0) continue;
      const int n = 1 + static_cast<int>(rng() % static_cast<uint64_t>(std::min(free, 9)));
      V got;
      pool.get_new_blocks(n, got);
      V want;
      for (int i = 0; i < n; ++i) {
        const BlockId b = queue.front();
        queue.pop_front();
        hashed[static_cast<size_t>(b)] = false;  // lazy eviction at the pop
        ref[static_cast<size_t>(b)] = 1;
        want.push_back(b);
      }
      ASSERT_EQ(got, want) << "op " << op;
      if (rng() % 4 == 0) {  // a table holding the null block (a skipped window block)
        pool.touch(V{kNullBlockId});
        ++ref[0];
        got.push_back(kNullBlockId);
      }
      holders.push_back(got);
    } else if (kind < 4 && caching && !holders.empty()) {  // hash some held blocks
      const V& held = holders[rng() % holders.size()];
      for (const BlockId b : held) {
        if (rng() % 2 == 0 || b == kNullBlockId || hashed[static_cast<size_t>(b)]) continue;
        pool.cache_full_blocks(V{b}, std::vector<BlockHash>{h(next_key++)});
        hashed[static_cast<size_t>(b)] = true;
      }
    } else if (kind < 6 && !holders.empty()) {  // share a held block or touch a free one
      V t;
      if (rng() % 2 == 0 || queue.empty()) {
        const V& held = holders[rng() % holders.size()];
        t.push_back(held[rng() % held.size()]);
      } else {
        auto it = queue.begin();
        std::advance(it, static_cast<long>(rng() % queue.size()));
        t.push_back(*it);
      }
      if (rng() % 3 == 0) t.push_back(t[0]);  // the same block twice in one list
      pool.touch(t);
      for (const BlockId b : t) {
        if (ref[static_cast<size_t>(b)] == 0 && b != kNullBlockId) queue.remove(b);
        ++ref[static_cast<size_t>(b)];
      }
      holders.push_back(t);
    } else if (!holders.empty()) {  // free a holder, reversed (a request) or as allocated
      const size_t i = rng() % holders.size();
      V list = holders[i];
      if (rng() % 2 == 0) std::reverse(list.begin(), list.end());
      bool whole = true;
      for (const BlockId b : list) {
        whole = whole && ref[static_cast<size_t>(b)] == 1 && b != kNullBlockId &&
                !hashed[static_cast<size_t>(b)];
      }
      fast_shaped += whole ? 1 : 0;
      // A list naming each block once is a table: free_held_blocks' precondition (every block
      // held, listed once) holds, and it must free exactly as free_blocks does.
      V sorted = list;
      std::sort(sorted.begin(), sorted.end());
      const bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
      // A table in KVCacheManager's layout (M4), reversed: unhashed blocks, then hashed ones, no
      // null block. With no shared block free_table_blocks frees it, given in table order.
      size_t unhashed = 0;
      while (unhashed < list.size() && !hashed[static_cast<size_t>(list[unhashed])]) ++unhashed;
      bool table_shaped = distinct && pool.num_shared_blocks() == 0;
      for (size_t k = 0; k < list.size(); ++k) {
        table_shaped = table_shaped && list[k] != kNullBlockId &&
                       (k < unhashed || hashed[static_cast<size_t>(list[k])]);
      }
      if (table_shaped && rng() % 2 == 0) {
        const V table(list.rbegin(), list.rend());
        pool.free_table_blocks(table, list.size() - unhashed);
        ++table_frees;
      } else if (distinct && rng() % 2 == 0) {
        pool.free_held_blocks(list);
        ++held_frees;
      } else {
        pool.free_blocks(list);
      }
      V front, back;
      for (const BlockId b : list) {
        if (--ref[static_cast<size_t>(b)] == 0 && b != kNullBlockId) {
          (hashed[static_cast<size_t>(b)] ? back : front).push_back(b);
        }
      }
      queue.insert(queue.begin(), front.begin(), front.end());
      queue.insert(queue.end(), back.begin(), back.end());
      holders[i] = holders.back();
      holders.pop_back();
    }
    ASSERT_EQ(pool.get_num_free_blocks(), static_cast<int32_t>(queue.size())) << "op " << op;
    if (op % 16 == 0) {
      ASSERT_EQ(pool.free_block_queue().get_all_free_blocks(), V(queue.begin(), queue.end()))
          << "op " << op;
      for (BlockId b = 0; b < kN; ++b) {
        ASSERT_EQ(pool.ref_cnt(b), ref[static_cast<size_t>(b)]) << "op " << op << " block " << b;
        ASSERT_EQ(pool.is_cached(b), hashed[static_cast<size_t>(b)]) << "op " << op;
      }
      ASSERT_NO_THROW(pool.check_invariants()) << "op " << op;
    }
  }
  // Both sides of the split were exercised, and both entry points.
  EXPECT_GT(fast_shaped, 1000);
  EXPECT_GT(held_frees, 1000);
  if (caching) {
    EXPECT_GT(table_frees, 100);  // (caching off shares a block nearly all the time here)
  }
  pool.check_invariants();
}

TEST(BlockPool, FreePathsMatchListRuleCachingOff) {
  run_free_paths_against_list(false, 21);
}

TEST(BlockPool, FreePathsMatchListRuleCachingOn) {
  run_free_paths_against_list(true, 22);
}

// A free that the fast path refuses part way (a shared block after unshared ones) must leave
// the pool exactly as the general loop does; so must freeing a block too often (it throws).
TEST(BlockPool, RefusedFastFreeChangesNothingFirst) {
  BlockPool pool(8, false);
  V a;
  pool.get_new_blocks(4, a);  // 1 2 3 4
  pool.touch(V{3});           // 3 is shared
  pool.free_blocks(V{1, 2, 3, 4});
  EXPECT_EQ(pool.free_block_queue().get_all_free_blocks(), (V{1, 2, 4, 5, 6, 7}));
  EXPECT_EQ(pool.ref_cnt(3), 1);
  pool.check_invariants();
  pool.free_blocks(V{3});
  EXPECT_EQ(pool.free_block_queue().get_all_free_blocks(), (V{3, 1, 2, 4, 5, 6, 7}));
  pool.check_invariants();
  EXPECT_THROW(pool.free_blocks(V{3}), std::logic_error);
}

// A double free is an error on every free path: a block listed twice in one call (the fast
// path's own position test, then the general loop's per-call mark) and a block that is already
// free, with no shared and no hashed block in the pool (the pass that reads no block state) and
// with some (the pass that does). The pool stays consistent afterwards: the blocks listed before
// the offending one are freed, the rest keep their counts.
TEST(BlockPool, DoubleFreeThrowsOnEveryPath) {
  for (const bool caching : {false, true}) {
    for (const bool with_shared : {false, true}) {
      BlockPool pool(10, caching);
      V a;
      pool.get_new_blocks(5, a);  // 1 2 3 4 5
      if (with_shared) pool.touch(V{5});
      EXPECT_EQ(pool.num_shared_blocks(), with_shared ? 1 : 0);
      EXPECT_THROW(pool.free_blocks(V{2, 1, 2}), std::logic_error) << caching << with_shared;
      ASSERT_NO_THROW(pool.check_invariants());
      EXPECT_EQ(pool.ref_cnt(2), 0);
      EXPECT_EQ(pool.ref_cnt(1), 0);
      EXPECT_EQ(pool.free_block_queue().get_all_free_blocks(), (V{2, 1, 6, 7, 8, 9}));
      EXPECT_THROW(pool.free_blocks(V{3, 1}), std::logic_error) << caching << with_shared;
      ASSERT_NO_THROW(pool.check_invariants());
      EXPECT_EQ(pool.ref_cnt(3), 0);
      EXPECT_EQ(pool.ref_cnt(4), 1);
      EXPECT_THROW(pool.free_blocks(V{6}), std::logic_error);  // never allocated
      ASSERT_NO_THROW(pool.check_invariants());
      pool.free_blocks(V{4});
      EXPECT_EQ(pool.free_block_queue().get_all_free_blocks(), (V{4, 3, 2, 1, 6, 7, 8, 9}));
      EXPECT_EQ(pool.ref_cnt(5), with_shared ? 2 : 1);
      ASSERT_NO_THROW(pool.check_invariants());
    }
  }
}

// The same at every index of lists long enough for the fast path's four-block steps (11 blocks:
// two steps and a remainder, walked last to first): a repeat of an earlier or a later listed
// block, or a block that is free, placed anywhere. The call throws and leaves the pool as the
// one-block-at-a-time rule does: the blocks listed before the offending one are freed, in order,
// ahead of the queue as it was; every other block keeps its count.
TEST(BlockPool, DoubleFreeAnywhereInALongList) {
  constexpr int32_t kN = 32;
  constexpr size_t kListed = 11;
  for (const bool caching : {false, true}) {
    for (const bool with_shared : {false, true}) {
      for (size_t at = 0; at <= kListed; ++at) {
        for (size_t which = 0; which <= kListed; ++which) {
          BlockPool pool(kN, caching);
          V a;
          pool.get_new_blocks(static_cast<int32_t>(kListed), a);  // 1 .. 11
          V held;
          pool.get_new_blocks(1, held);  // 12, kept allocated
          if (with_shared) pool.touch(held);
          const V queue_before = pool.free_block_queue().get_all_free_blocks();
          std::reverse(a.begin(), a.end());  // as a finished request lists its table
          V offered = a;
          // which < kListed: a repeat of a[which]; else a block that is free.
          const BlockId extra = which < kListed ? a[which] : queue_before[at % queue_before.size()];
          offered.insert(offered.begin() + static_cast<std::ptrdiff_t>(at), extra);
          // The first listing that finds its block already free (a repeat's second listing or
          // the free block) is the offending one.
          const size_t offending =
              which < kListed ? std::max(at, which + (which >= at ? 1 : 0)) : at;
          EXPECT_THROW(pool.free_blocks(offered), std::logic_error)
              << caching << with_shared << " at " << at << " which " << which;
          ASSERT_NO_THROW(pool.check_invariants());
          V want(offered.begin(), offered.begin() + static_cast<std::ptrdiff_t>(offending));
          want.insert(want.end(), queue_before.begin(), queue_before.end());
          ASSERT_EQ(pool.free_block_queue().get_all_free_blocks(), want)
              << caching << with_shared << " at " << at << " which " << which;
          for (size_t i = offending + 1; i < offered.size(); ++i) {
            const BlockId b = offered[i];
            if (std::find(want.begin(), want.end(), b) == want.end()) {
              EXPECT_EQ(pool.ref_cnt(b), 1) << "block " << b;
            }
          }
          EXPECT_EQ(pool.ref_cnt(held[0]), with_shared ? 2 : 1);
        }
      }
    }
  }
}

// The same for the split path: a finished request's table in reverse, its partial last block
// unhashed (prepended) and its full blocks cached (appended, evicted last), with a repeat of any
// listed block, a free block or the null block (which sends it to the general path) placed
// anywhere, with and without a shared block in the pool. A clean list is split exactly; otherwise
// the call throws and leaves the pool as the one-block-at-a-time rule does: the listed blocks
// before the offending one freed, the unhashed ones ahead of the queue as it was and the hashed
// ones behind it, in list order.
TEST(BlockPool, UnhashedThenHashedFreesAsTheGeneralPath) {
  constexpr int32_t kN = 32;
  constexpr size_t kListed = 11;
  for (const bool with_shared : {false, true}) {
    for (size_t at = 0; at <= kListed + 1; ++at) {
      for (size_t which = 0; which <= kListed + 1; ++which) {
        BlockPool pool(kN, true);
        V a;
        pool.get_new_blocks(static_cast<int32_t>(kListed), a);  // 1 .. 11
        V held;
        pool.get_new_blocks(1, held);  // 12, kept allocated
        if (with_shared) pool.touch(held);
        pool.cache_private_blocks(std::span<const BlockId>(a.data(), kListed - 1));  // 1 .. 10
        const V queue_before = pool.free_block_queue().get_all_free_blocks();
        std::reverse(a.begin(), a.end());  // 11 (unhashed), 10 .. 1 (hashed)
        V offered = a;
        // at > kListed: nothing inserted (a clean free); which < kListed: a repeat of a[which];
        // which == kListed: a block that is free; else the null block (count -1, not queued).
        size_t offending = SIZE_MAX;
        if (at <= kListed) {
          const BlockId extra = which < kListed    ? a[which]
                                : which == kListed ? queue_before[at % queue_before.size()]
                                                   : kNullBlockId;
          offered.insert(offered.begin() + static_cast<std::ptrdiff_t>(at), extra);
          if (which < kListed) {
            offending = std::max(at, which + (which >= at ? 1 : 0));
          } else if (which == kListed) {
            offending = at;
          }
        }
        const auto label = ::testing::Message()
                           << with_shared << " at " << at << " which " << which;
        if (offending == SIZE_MAX) {
          ASSERT_NO_THROW(pool.free_blocks(offered)) << label;
          offending = offered.size();
        } else {
          EXPECT_THROW(pool.free_blocks(offered), std::logic_error) << label;
        }
        ASSERT_NO_THROW(pool.check_invariants()) << label;
        V want;
        V behind;
        for (size_t i = 0; i < offending; ++i) {
          const BlockId b = offered[i];
          if (b == kNullBlockId) continue;
          (pool.is_cached(b) ? behind : want).push_back(b);
        }
        want.insert(want.end(), queue_before.begin(), queue_before.end());
        want.insert(want.end(), behind.begin(), behind.end());
        ASSERT_EQ(pool.free_block_queue().get_all_free_blocks(), want) << label;
        EXPECT_EQ(pool.ref_cnt(held[0]), with_shared ? 2 : 1);
      }
    }
  }
}

// The counts as vLLM keeps them: a fresh block 1, a touch of a free cached block 1, of an
// allocated one +1; the null block starts at 0 and follows touches and frees, never queued.
TEST(BlockPool, RefCountsAndTheNullBlock) {
  BlockPool pool(6, true);
  EXPECT_EQ(pool.ref_cnt(kNullBlockId), 0);
  pool.touch(V{kNullBlockId, kNullBlockId});
  EXPECT_EQ(pool.ref_cnt(kNullBlockId), 2);
  V a;
  pool.get_new_blocks(2, a);  // 1 2
  EXPECT_EQ(pool.ref_cnt(1), 1);
  EXPECT_EQ(pool.ref_cnt(3), 0);
  EXPECT_TRUE(pool.is_free(3));
  EXPECT_FALSE(pool.is_free(1));
  pool.touch(V{1, 1});
  EXPECT_EQ(pool.ref_cnt(1), 3);
  EXPECT_EQ(pool.num_shared_blocks(), 1);
  pool.free_blocks(V{1, kNullBlockId, 2});
  EXPECT_EQ(pool.ref_cnt(1), 2);
  EXPECT_EQ(pool.ref_cnt(2), 0);
  EXPECT_EQ(pool.ref_cnt(kNullBlockId), 1);
  pool.free_blocks(V{1, 1, kNullBlockId, kNullBlockId});
  EXPECT_EQ(pool.ref_cnt(1), 0);
  EXPECT_EQ(pool.num_shared_blocks(), 0);
  EXPECT_EQ(pool.ref_cnt(kNullBlockId), -1);  // vLLM does not guard the null block's count
  EXPECT_FALSE(pool.free_block_queue().contains(kNullBlockId));
  pool.check_invariants();
}

}  // namespace
}  // namespace kvsim
