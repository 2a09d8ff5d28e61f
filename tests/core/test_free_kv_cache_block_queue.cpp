#include "kvsim/core/free_kv_cache_block_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <vector>

#include "property_ops.h"
#include "reference_free_queue.h"

namespace kvsim {
namespace {

using V = std::vector<BlockId>;

TEST(FreeKVCacheBlockQueue, StartsAscendingAndPopsFromHead) {
  FreeKVCacheBlockQueue q(5);
  EXPECT_EQ(q.get_all_free_blocks(), (V{0, 1, 2, 3, 4}));
  EXPECT_EQ(q.popleft(), 0);
  V out;
  q.popleft_n(2, out);
  EXPECT_EQ(out, (V{1, 2}));
  EXPECT_EQ(q.num_free_blocks(), 2);
  EXPECT_EQ(q.get_all_free_blocks(), (V{3, 4}));
  q.check_invariants();
}

TEST(FreeKVCacheBlockQueue, PrependKeepsListOrderAppendGoesToTail) {
  FreeKVCacheBlockQueue q(6);
  V out;
  q.popleft_n(4, out);  // queue: [4, 5]
  q.prepend_n(V{2, 0});
  EXPECT_EQ(q.get_all_free_blocks(), (V{2, 0, 4, 5}));
  q.append_n(V{3, 1});
  EXPECT_EQ(q.get_all_free_blocks(), (V{2, 0, 4, 5, 3, 1}));
  q.remove(4);
  EXPECT_EQ(q.get_all_free_blocks(), (V{2, 0, 5, 3, 1}));
  EXPECT_FALSE(q.contains(4));
  EXPECT_TRUE(q.contains(5));
  q.check_invariants();
}

TEST(FreeKVCacheBlockQueue, MisuseThrows) {
  FreeKVCacheBlockQueue q(2);
  EXPECT_THROW(q.append(0), std::logic_error);  // already free
  V out;
  EXPECT_THROW(q.popleft_n(3, out), std::logic_error);
  q.popleft_n(2, out);
  EXPECT_THROW(q.popleft(), std::logic_error);
  EXPECT_THROW(q.remove(1), std::logic_error);
  EXPECT_THROW(q.append(2), std::logic_error);  // out of range
  q.append(1);
  EXPECT_EQ(q.get_all_free_blocks(), (V{1}));
  EXPECT_THROW(q.prepend_n(V{0, 0}), std::logic_error);  // the same block twice in one push
}

// Removals in the middle leave tombstones that pops skip; removals at either end move the end.
TEST(FreeKVCacheBlockQueue, TombstonesAreSkippedAndEndsStayLive) {
  FreeKVCacheBlockQueue q(8);
  q.remove(3);
  q.remove(5);
  q.remove(0);  // the head: the head moves instead of leaving a tombstone
  q.remove(7);  // the tail
  EXPECT_EQ(q.get_all_free_blocks(), (V{1, 2, 4, 6}));
  q.check_invariants();
  V out;
  q.popleft_n(3, out);
  EXPECT_EQ(out, (V{1, 2, 4}));
  q.append(3);
  q.prepend_n(V{5});
  EXPECT_EQ(q.get_all_free_blocks(), (V{5, 6, 3}));
  q.remove(6);
  EXPECT_EQ(q.get_all_free_blocks(), (V{5, 3}));
  q.check_invariants();
}

// Enough middle removals and re-appends to fill the ring with tombstones force compactions; the
// positions wrap around the ring many times.
TEST(FreeKVCacheBlockQueue, CompactionAndWrapKeepOrder) {
  constexpr int32_t kN = 40;
  FreeKVCacheBlockQueue q(kN);
  reference::ReferenceFreeKVCacheBlockQueue ref(kN);
  const uint32_t cap = q.capacity();
  EXPECT_GE(cap, static_cast<uint32_t>(kN + kN / 4));
  for (int round = 0; round < 200; ++round) {
    // Remove every third free block from the middle, then append the removed ones.
    V free_now = ref.get_all_free_blocks();
    V removed;
    for (size_t i = 1; i + 1 < free_now.size(); i += 3) removed.push_back(free_now[i]);
    for (BlockId b : removed) {
      q.remove(b);
      ref.remove(b);
    }
    q.append_n(removed);
    ref.append_n(removed);
    V a, b;
    q.popleft_n(3, a);
    ref.popleft_n(3, b);
    ASSERT_EQ(a, b) << "round " << round;
    std::reverse(a.begin(), a.end());
    q.prepend_n(a);
    ref.prepend_n(a);
    ASSERT_EQ(q.get_all_free_blocks(), ref.get_all_free_blocks()) << "round " << round;
    ASSERT_NO_THROW(q.check_invariants()) << "round " << round;
  }
}

// Differential test: the same random operation sequence on the ring and on the reference linked
// list gives the same pops, sizes and membership; the ring's invariants hold throughout.
void run_against_reference(int32_t num_blocks, int64_t ops, uint64_t seed) {
  FreeKVCacheBlockQueue q(num_blocks);
  reference::ReferenceFreeKVCacheBlockQueue ref(num_blocks);
  std::mt19937_64 rng(seed);
  V taken;  // blocks out of the queue, in no particular order
  auto take = [&](size_t i) {
    const BlockId b = taken[i];
    taken[i] = taken.back();
    taken.pop_back();
    return b;
  };
  // Slips a block the queue must refuse on its own into `offered` (a copy of `batch`) at a random
  // place: a free one, or a repeat of a listed one. Returns true.
  auto slip_in_bad_block = [&](const V& batch, V& offered) {
    const V free_now = ref.get_all_free_blocks();
    const size_t at = rng() % (offered.size() + 1);
    const BlockId b = !free_now.empty() && rng() % 2 == 0 ? free_now[rng() % free_now.size()]
                                                          : batch[rng() % batch.size()];
    offered.insert(offered.begin() + static_cast<std::ptrdiff_t>(at), b);
    return true;
  };
  for (int64_t op = 0; op < ops; ++op) {
    const int kind = static_cast<int>(rng() % 12);
    if (kind < 3 && ref.num_free_blocks() > 0) {  // batch pop
      const auto n = static_cast<int32_t>(
          rng() % static_cast<uint64_t>(std::min<int32_t>(ref.num_free_blocks(), 9) + 1));
      V a, b;
      if (rng() % 2 == 0) {
        q.popleft_n(n, a);
      } else {
        // BlockPool's form: ids written to a buffer, on_pop called once per id, in order.
        a.assign(static_cast<size_t>(n), -2);
        V seen;
        q.popleft_n(n, a.data(), [&](BlockId x) { seen.push_back(x); });
        ASSERT_EQ(seen, a) << "op " << op;
      }
      ref.popleft_n(n, b);
      ASSERT_EQ(a, b) << "op " << op;
      taken.insert(taken.end(), a.begin(), a.end());
    } else if (kind < 4 && ref.num_free_blocks() > 0) {  // single pop
      const BlockId a = q.popleft();
      ASSERT_EQ(a, ref.popleft()) << "op " << op;
      taken.push_back(a);
    } else if (kind < 7 && ref.num_free_blocks() > 0) {  // remove from anywhere (a prefix hit)
      const V all = ref.get_all_free_blocks();
      const BlockId b = all[rng() % all.size()];
      q.remove(b);
      ref.remove(b);
      taken.push_back(b);
    } else if (kind < 9 && !taken.empty()) {  // prepend a batch (unhashed frees)
      V batch;
      // Up to 11 blocks: the fused push runs four blocks per step, so batches take zero, one
      // or two unrolled steps plus a remainder.
      const size_t n = 1 + rng() % std::min<size_t>(taken.size(), 11);
      for (size_t i = 0; i < n; ++i) batch.push_back(take(rng() % taken.size()));
      const uint64_t how = rng() % 4;
      if (how == 0) {
        q.prepend_n(batch);
      } else if (how == 1) {
        q.prepend_n_unchecked(batch);
      } else {
        // BlockPool's fused push: a refusal (some keep() false, or a block that is already
        // free or listed twice; the rest's positions written anyway) must leave the queue as it
        // was.
        const bool refuse = how == 3 && rng() % 2 == 0;
        const size_t refused_at = rng() % batch.size();
        V offered = batch;
        const bool bad_block = how == 2 && rng() % 3 == 0 && slip_in_bad_block(batch, offered);
        size_t calls = 0;
        const bool pushed = q.prepend_n_if_all(offered, [&](BlockId b) {
          EXPECT_EQ(b, offered[offered.size() - 1 - calls])
              << "keep() is called on the blocks last to first";
          const bool keep = !(refuse && calls == refused_at);
          ++calls;
          return keep;
        });
        ASSERT_EQ(pushed, !refuse && !bad_block) << "op " << op;
        if (pushed) {
          ASSERT_EQ(calls, offered.size()) << "op " << op;
        }
        if (refuse && !bad_block) {
          ASSERT_EQ(calls, refused_at + 1) << "op " << op;
        }
        if (!pushed) {
          taken.insert(taken.end(), batch.begin(), batch.end());
          batch.clear();
        }
      }
      if (!batch.empty()) ref.prepend_n(batch);
    } else if (kind < 11 && !taken.empty()) {  // append a batch (hashed frees)
      V batch;
      const size_t n = 1 + rng() % std::min<size_t>(taken.size(), 6);
      for (size_t i = 0; i < n; ++i) batch.push_back(take(rng() % taken.size()));
      const uint64_t how = rng() % 4;
      if (how == 0) {
        q.append_n(batch);
      } else if (how == 1) {
        q.append_n_unchecked(batch);
      } else {
        // The fused append: a refusal (keep() false, or a block already free or listed twice)
        // leaves the queue as it was; an accepted one may be taken back (unappend_n).
        const bool refuse = how == 3 && rng() % 2 == 0;
        const size_t refused_at = rng() % batch.size();
        V offered = batch;
        const bool bad_block = how == 2 && rng() % 3 == 0 && slip_in_bad_block(batch, offered);
        size_t calls = 0;
        const bool pushed = q.append_n_if_all(offered, [&](BlockId b) {
          EXPECT_EQ(b, offered[calls]) << "keep() is called on the blocks first to last";
          const bool keep = !(refuse && calls == refused_at);
          ++calls;
          return keep;
        });
        ASSERT_EQ(pushed, !refuse && !bad_block) << "op " << op;
        if (pushed && rng() % 4 == 0) {
          q.unappend_n(offered.size());
          ASSERT_NO_THROW(q.check_invariants()) << "op " << op;
          ASSERT_EQ(q.get_all_free_blocks(), ref.get_all_free_blocks()) << "op " << op;
          q.append_n(batch);
        } else if (!pushed) {
          q.append_n(batch);
        }
      }
      ref.append_n(batch);
    } else if (!taken.empty()) {  // single append
      const BlockId b = take(rng() % taken.size());
      q.append(b);
      ref.append(b);
    }
    ASSERT_EQ(q.num_free_blocks(), ref.num_free_blocks()) << "op " << op;
    if (op % 32 == 0) {
      ASSERT_EQ(q.get_all_free_blocks(), ref.get_all_free_blocks()) << "op " << op;
      for (BlockId b = 0; b < num_blocks; ++b) {
        ASSERT_EQ(q.contains(b), ref.contains(b)) << "op " << op << " block " << b;
      }
      ASSERT_NO_THROW(q.check_invariants()) << "op " << op;
      ASSERT_NO_THROW(ref.check_invariants()) << "op " << op;
    }
  }
  EXPECT_EQ(q.get_all_free_blocks(), ref.get_all_free_blocks());
  q.check_invariants();
}

TEST(FreeKVCacheBlockQueue, MatchesReferenceListSmall) {
  run_against_reference(12, scaled_ops(300000), 11);
}

TEST(FreeKVCacheBlockQueue, MatchesReferenceListLarger) {
  run_against_reference(300, scaled_ops(300000), 12);
}

// The fused prepend at every offset of the ring, so one run or two (the wrap) are both taken,
// and a refusal at every index leaves order, membership and invariants as they were.
TEST(FreeKVCacheBlockQueue, PrependIfAllAcrossTheWrap) {
  constexpr int32_t kN = 12;
  for (int32_t shift = 0; shift < 40; ++shift) {
    FreeKVCacheBlockQueue q(kN);
    reference::ReferenceFreeKVCacheBlockQueue ref(kN);
    // Move the head around the ring: pop and re-append `shift` blocks.
    for (int32_t i = 0; i < shift; ++i) {
      const BlockId b = q.popleft();
      ASSERT_EQ(b, ref.popleft());
      q.append(b);
      ref.append(b);
    }
    V batch;
    q.popleft_n(5, batch);
    V b2;
    ref.popleft_n(5, b2);
    ASSERT_EQ(batch, b2);
    std::reverse(batch.begin(), batch.end());
    for (size_t refuse_at = 0; refuse_at < batch.size(); ++refuse_at) {
      size_t i = 0;
      EXPECT_FALSE(q.prepend_n_if_all(batch, [&](BlockId) { return i++ != refuse_at; }));
      ASSERT_EQ(q.get_all_free_blocks(), ref.get_all_free_blocks()) << "shift " << shift;
      for (BlockId b = 0; b < kN; ++b) ASSERT_EQ(q.contains(b), ref.contains(b)) << b;
      ASSERT_NO_THROW(q.check_invariants());
    }
    // The queue's own refusals, at every index: a block listed twice (the repeat before or
    // after the original) and a block that is free.
    const BlockId free_block = ref.get_all_free_blocks().front();
    for (size_t at = 0; at <= batch.size(); ++at) {
      for (size_t which = 0; which <= batch.size(); ++which) {
        V offered = batch;
        offered.insert(offered.begin() + static_cast<std::ptrdiff_t>(at),
                       which < batch.size() ? batch[which] : free_block);
        EXPECT_FALSE(q.prepend_n_if_all(offered, [](BlockId) { return true; }))
            << "shift " << shift << " at " << at << " which " << which;
        ASSERT_EQ(q.get_all_free_blocks(), ref.get_all_free_blocks()) << "shift " << shift;
        for (BlockId b = 0; b < kN; ++b) ASSERT_EQ(q.contains(b), ref.contains(b)) << b;
        ASSERT_NO_THROW(q.check_invariants());
      }
    }
    EXPECT_TRUE(q.prepend_n_if_all(batch, [](BlockId) { return true; }));
    ref.prepend_n(batch);
    ASSERT_EQ(q.get_all_free_blocks(), ref.get_all_free_blocks()) << "shift " << shift;
    for (BlockId b = 0; b < kN; ++b) ASSERT_EQ(q.contains(b), ref.contains(b)) << b;
    ASSERT_NO_THROW(q.check_invariants());
  }
}

TEST(FreeKVCacheBlockQueue, EmptyQueue) {
  FreeKVCacheBlockQueue q(0);
  EXPECT_EQ(q.num_free_blocks(), 0);
  EXPECT_TRUE(q.get_all_free_blocks().empty());
  V out;
  q.popleft_n(0, out);
  EXPECT_THROW(q.popleft(), std::logic_error);
  q.check_invariants();
}

}  // namespace
}  // namespace kvsim
