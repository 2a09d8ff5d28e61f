// Randomized property tests: BlockPool against an obviously-correct reference model, and the
// KVCacheManager's invariants under random request traffic. KVSIM_PROPERTY_OPS scales the count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "kvsim/core/block_hash.h"
#include "kvsim/core/block_pool.h"
#include "kvsim/core/kv_cache_manager.h"

#include "property_ops.h"

namespace kvsim {
namespace {

// The reference: a plain list for the free queue, a map of ref counts, and a map from hash to an
// insertion-ordered list of blocks. Written for clarity, not speed.
struct ReferencePool {
  std::list<BlockId> free_queue;
  std::map<BlockId, int> ref;
  std::map<BlockId, uint64_t> hash_of;               // hashed blocks only
  std::map<uint64_t, std::vector<BlockId>> by_hash;  // insertion order
  bool caching;

  ReferencePool(int n, bool c) : caching(c) {
    for (BlockId b = 1; b < n; ++b) free_queue.push_back(b);
    for (BlockId b = 0; b < n; ++b) ref[b] = 0;
  }
  void evict(BlockId b) {
    auto it = hash_of.find(b);
    if (it == hash_of.end()) return;
    auto& v = by_hash[it->second];
    v.erase(std::find(v.begin(), v.end(), b));
    if (v.empty()) by_hash.erase(it->second);
    hash_of.erase(it);
  }
  std::vector<BlockId> get_new(int n) {
    std::vector<BlockId> out;
    for (int i = 0; i < n; ++i) {
      BlockId b = free_queue.front();
      free_queue.pop_front();
      if (caching) evict(b);
      ref[b] = 1;
      out.push_back(b);
    }
    return out;
  }
  void cache(BlockId b, uint64_t h) {
    if (!caching || b == 0 || hash_of.count(b)) return;
    hash_of[b] = h;
    by_hash[h].push_back(b);
  }
  void touch(const std::vector<BlockId>& bs) {
    for (BlockId b : bs) {
      if (ref[b] == 0 && b != 0) free_queue.remove(b);
      ++ref[b];
    }
  }
  void free(const std::vector<BlockId>& bs) {
    std::vector<BlockId> front, back;
    for (BlockId b : bs) {
      --ref[b];
      if (b != 0 && ref[b] == 0) (hash_of.count(b) ? back : front).push_back(b);
    }
    free_queue.insert(free_queue.begin(), front.begin(), front.end());
    free_queue.insert(free_queue.end(), back.begin(), back.end());
  }
  std::optional<BlockId> lookup(uint64_t h) const {
    auto it = by_hash.find(h);
    if (it == by_hash.end()) return std::nullopt;
    return it->second.front();
  }
};

BlockHash key(uint64_t h) {
  return hash_block_unique(none_hash(), h, 0);
}

void run_pool_against_reference(bool caching, int num_blocks, int64_t ops, uint64_t seed) {
  BlockPool pool(num_blocks, caching);
  ReferencePool ref(num_blocks, caching);
  std::mt19937_64 rng(seed);
  std::vector<std::vector<BlockId>> holders;  // each "request" holds a list of blocks
  const uint64_t num_keys = static_cast<uint64_t>(num_blocks) * 2;
  for (int64_t op = 0; op < ops; ++op) {
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 4) {  // allocate
      const int free = pool.get_num_free_blocks();
      if (free == 0) continue;
      const int n = 1 + static_cast<int>(rng() % static_cast<uint64_t>(std::min(free, 8)));
      std::vector<BlockId> got;
      pool.get_new_blocks(n, got);
      ASSERT_EQ(got, ref.get_new(n)) << "op " << op;
      holders.push_back(got);
    } else if (kind < 6 && !holders.empty()) {  // cache some held blocks
      auto& h = holders[rng() % holders.size()];
      const BlockId b = h[rng() % h.size()];
      const uint64_t k = rng() % num_keys;
      pool.cache_full_blocks(std::vector<BlockId>{b}, std::vector<BlockHash>{key(k)});
      ref.cache(b, k);
    } else if (kind < 8 && caching) {  // prefix hit on a cached block (free or in use)
      const uint64_t k = rng() % num_keys;
      auto got = pool.get_cached_block(key(k));
      auto want = ref.lookup(k);
      ASSERT_EQ(got, want) << "op " << op;
      if (got) {
        std::vector<BlockId> t{*got};
        pool.touch(t);
        ref.touch(t);
        holders.push_back(t);
      }
    } else if (!holders.empty()) {  // free a holder, in reverse order like a request
      const size_t i = rng() % holders.size();
      std::vector<BlockId> rev(holders[i].rbegin(), holders[i].rend());
      pool.free_blocks(rev);
      ref.free(rev);
      holders[i] = holders.back();
      holders.pop_back();
    }
    ASSERT_EQ(pool.get_num_free_blocks(), static_cast<int>(ref.free_queue.size())) << "op " << op;
    if (op % 64 == 0) {
      const auto q = pool.free_block_queue().get_all_free_blocks();
      ASSERT_TRUE(std::equal(q.begin(), q.end(), ref.free_queue.begin(), ref.free_queue.end()))
          << "op " << op;
      for (BlockId b = 1; b < num_blocks; ++b)
        ASSERT_EQ(pool.ref_cnt(b), ref.ref[b]) << "block " << b;
      ASSERT_NO_THROW(pool.check_invariants()) << "op " << op;
    }
  }
  pool.check_invariants();
}

TEST(AllocatorProperties, BlockPoolMatchesReferenceWithCaching) {
  run_pool_against_reference(true, 48, scaled_ops(600000), 1);
}

TEST(AllocatorProperties, BlockPoolMatchesReferenceWithoutCaching) {
  run_pool_against_reference(false, 48, scaled_ops(400000), 2);
}

// Random requests with shared prefixes through the manager: admit, decode, preempt/free. On the
// single full-attention path and on one sliding-window group (W = 10: need 3 blocks), with each
// prefix-cache retention interval the layout accepts (-1 dense, 0 sparse, 16 = 4 blocks); the
// junction is stored at each lookup as the scheduler does.
void run_manager_traffic(bool sliding_window, int32_t retention_interval, int64_t base_ops) {
  constexpr int32_t kBs = 4;
  KVCacheManagerConfig c{.num_gpu_blocks = 40, .block_size = kBs, .max_model_len = 96};
  c.prefix_cache_retention_interval = retention_interval;
  if (sliding_window) {
    KVCacheSpec s;
    s.kind = KVCacheSpecKind::kSlidingWindow;
    s.block_size = kBs;
    s.page_size_bytes = 4096;
    s.sliding_window = 10;
    c.kv_cache_config.num_blocks = 40;
    c.kv_cache_config.kv_cache_groups.push_back({{0}, s});
  }
  KVCacheManager m(c);
  std::mt19937_64 rng(7);
  std::vector<std::shared_ptr<const std::vector<int32_t>>> prefixes;
  for (int p = 0; p < 4; ++p) {
    std::vector<int32_t> t(32);
    for (auto& x : t) x = static_cast<int32_t>(rng() % 50000);
    prefixes.push_back(std::make_shared<const std::vector<int32_t>>(t));
  }
  std::vector<std::unique_ptr<Request>> live;
  int64_t next_id = 0;
  const int64_t ops = scaled_ops(base_ops);
  for (int64_t op = 0; op < ops; ++op) {
    const int kind = static_cast<int>(rng() % 8);
    if (kind < 3 || live.empty()) {  // new request sharing a random prefix length
      auto r = std::make_unique<Request>();
      r->request_id = next_id++;
      const auto& pre = *prefixes[rng() % prefixes.size()];
      std::vector<int32_t> t(pre.begin(), pre.begin() + static_cast<long>(rng() % pre.size()));
      const size_t extra = 1 + rng() % 30;
      for (size_t i = 0; i < extra; ++i) t.push_back(static_cast<int32_t>(100000 + rng() % 1000));
      r->num_prompt_tokens = static_cast<int32_t>(t.size());
      r->content.token_ids = std::make_shared<const std::vector<int32_t>>(std::move(t));
      r->content.salt = static_cast<uint64_t>(r->request_id) + 1;
      r->enable_block_hashing(kBs);
      ComputedBlocks hit = m.get_computed_blocks(*r);
      r->shared_prefix_boundary = hit.shared_prefix_boundary;
      AllocateSlotsArgs a;
      a.num_new_tokens = std::min<int32_t>(r->num_tokens() - hit.num_computed_tokens,
                                           1 + static_cast<int32_t>(rng() % 24));
      a.num_new_computed_tokens = hit.num_computed_tokens;
      a.new_computed_blocks = hit.blocks;
      a.new_computed_group_blocks = hit.group_blocks;
      a.full_sequence_must_fit = rng() % 2 == 0;
      a.has_scheduled_reqs = !live.empty();
      if (m.allocate_slots(*r, a)) {
        r->num_computed_tokens = hit.num_computed_tokens + a.num_new_tokens;
        r->status = RequestStatus::RUNNING;
        live.push_back(std::move(r));
      }
    } else if (kind < 7) {  // advance a running request by a chunk or one decode token
      Request& r = *live[rng() % live.size()];
      if (r.num_computed_tokens >= r.num_tokens()) r.append_output_tokens(1);
      const int32_t remaining = r.num_tokens() - r.num_computed_tokens;
      const int32_t n = std::min<int32_t>(remaining, 1 + static_cast<int32_t>(rng() % 8));
      if (r.num_computed_tokens + n >= 96) continue;
      if (m.allocate_slots(r, {.num_new_tokens = n})) r.num_computed_tokens += n;
    } else {  // finish or preempt
      const size_t i = rng() % live.size();
      m.free(*live[i]);
      live[i] = std::move(live.back());
      live.pop_back();
    }
    if (op % 16 == 0) {
      ASSERT_NO_THROW(m.check_invariants()) << "op " << op;
    }
  }
  m.check_invariants();
  EXPECT_GT(m.prefix_cache_stats().hits, 0);
  EXPECT_GT(m.block_pool().num_evictions(), 0);
}

TEST(AllocatorProperties, KVCacheManagerInvariantsUnderRandomTraffic) {
  for (int32_t r : {-1, 0}) {
    SCOPED_TRACE(testing::Message() << "prefix_cache_retention_interval " << r);
    run_manager_traffic(false, r, 200000);
  }
}

TEST(AllocatorProperties, SlidingWindowManagerInvariantsUnderRandomTraffic) {
  for (int32_t r : {-1, 0, 16}) {
    SCOPED_TRACE(testing::Message() << "prefix_cache_retention_interval " << r);
    run_manager_traffic(true, r, 40000);
  }
}

}  // namespace
}  // namespace kvsim
