// FreeKVCacheBlockQueue: vLLM's free-block queue (vllm/v1/core/kv_cache_utils.py), with vLLM's
// exact order, stored as a ring of block ids with lazy deletion instead of a linked list.
//
// vLLM needs four operations: pop from the head (allocation, popleft_n), prepend (blocks freed
// without a hash are reused first), append (hashed blocks are evicted last, LRU) and O(1) removal
// from the middle (a prefix-cache hit on a free cached block, `remove`). A linked list pays one
// dependent load per popped block; here the free blocks sit in head-to-tail order in a
// power-of-two ring, so popleft_n/append_n/prepend_n are contiguous copies, and `remove` writes a
// tombstone (kRemoved) into the block's slot, which pops skip.
//
// Representation: ring_ holds logical positions [head_, tail_) (uint32 counters taken modulo the
// capacity, so both ends may move either way and wrap); pos_[b] is the logical position of b's
// latest entry.
//
// Invariants (checked by check_invariants()):
//   Q1 0 <= tail_ - head_ <= capacity; every entry in [head_, tail_) is a block id in
//      [0, num_blocks) or kRemoved.
//   Q2 b is free (contains(b)) <=> pos_[b] is in [head_, tail_) and ring_[pos_[b]] == b; a block
//      is in the ring at most once outside tombstones, so head-to-tail order of the non-tombstone
//      entries is the free list of vLLM.
//   Q3 num_free_blocks() == number of non-tombstone entries in [head_, tail_).
//   Q4 The entries at head_ and tail_ - 1 are not tombstones (when the ring is not empty): removal
//      at an end moves the end, so tombstones only sit strictly inside.
// Cost: popleft_n/append_n/prepend_n O(n) with no dependent loads (popleft_n skips tombstones in
// the popped range); remove O(1); a push that finds the ring full compacts it in O(capacity),
// which needs capacity - num_blocks >= num_blocks / 4 tombstones since the last compaction, so it
// is O(1) amortised per removal.
// Memory: 4 B per block (pos_) plus 4 B per ring slot, capacity = the
// smallest power of two >= num_blocks * 5/4 + 16 (1.25 to 2.5 slots per block).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kvsim/core/types.h"

namespace kvsim {

class FreeKVCacheBlockQueue {
 public:
  // Creates the queue holding every id [0, num_blocks) in ascending order.
  explicit FreeKVCacheBlockQueue(int32_t num_blocks);

  int32_t num_free_blocks() const { return num_free_blocks_; }
  // `b` must be in [0, num_blocks).
  bool contains(BlockId b) const {
    const uint32_t p = pos_[static_cast<size_t>(b)];
    return p - head_ < tail_ - head_ && ring_[p & mask_] == b;
  }

  // Removes and returns the head. Throws std::logic_error when empty. (Inline: a decode that
  // crosses into a new block pops one block.)
  BlockId popleft() {
    if (num_free_blocks_ == 0) [[unlikely]] {
      throw_not_enough_free(1, 0);
    }
    const BlockId b = ring_[head_ & mask_];  // Q4: the head entry is live
    ++head_;
    --num_free_blocks_;
    // Tombstones anywhere (rare) may now sit at the head: trim them (Q4).
    if (tail_ - head_ != static_cast<uint32_t>(num_free_blocks_)) [[unlikely]] {
      trim_ends();
    }
    return b;
  }
  // Removes the first n blocks and appends them to `out` in head-to-tail order.
  // Throws std::logic_error when fewer than n are free.
  void popleft_n(int32_t n, std::vector<BlockId>& out) {
    const size_t first = out.size();
    if (n < 0 || n > num_free_blocks_) [[unlikely]] {
      throw_not_enough_free(n, num_free_blocks_);
    }
    // With no tombstones, one or two runs appended straight from the ring (no zero fill first).
    if (pop_head_runs(n, [&out](const BlockId* run, uint32_t len) {
          out.insert(out.end(), run, run + len);
        })) [[likely]] {
      return;
    }
    out.resize(first + static_cast<size_t>(n));
    popleft_n_slow(n, out.data() + first);
  }
  // Removes the first n blocks, writes them to dst[0, n) in head-to-tail order and calls
  // on_pop(b) for each, in that order, as it is written (BlockPool checks a popped block for a
  // hash in the same pass, with no second read of dst). 0 <= n <= num_free_blocks() is the
  // caller's to check; on_pop must not touch this queue.
  template <class OnPop>
  void popleft_n(int32_t n, BlockId* dst, OnPop&& on_pop) {
    BlockId* out = dst;
    if (pop_head_runs(n, [&out, &on_pop](const BlockId* run, uint32_t len) {
          for (uint32_t i = 0; i < len; ++i) {
            const BlockId b = run[i];
            out[i] = b;
            on_pop(b);
          }
          out += len;
        })) [[likely]] {
      return;
    }
    popleft_n_slow(n, dst);
    for (int32_t i = 0; i < n; ++i) on_pop(dst[i]);
  }
  // O(1) removal from anywhere in the queue. Throws std::logic_error if `b` is not free.
  void remove(BlockId b);
  // Pushes keep the given order (prepend_n: blocks[0] becomes the new head). Each throws
  // std::logic_error on a block that is out of range or already free (blocks before it in the
  // list stay pushed: a caller bug, not a recoverable state).
  void append(BlockId b);
  void append_n(std::span<const BlockId> blocks) { push_n_checked<false>(blocks); }
  void prepend_n(std::span<const BlockId> blocks) { push_n_checked<true>(blocks); }
  // The same without the per-block check, for a caller that guarantees every block is in range,
  // not free and listed once (BlockPool: a block whose ref count just reached 0 was in use, I1).
  // check_invariants() detects a violation afterwards.
  void append_n_unchecked(std::span<const BlockId> blocks) { push_unchecked<false>(blocks); }
  void prepend_n_unchecked(std::span<const BlockId> blocks) { push_unchecked<true>(blocks); }
  // The same for the blocks in reverse (blocks.back() first), without a reversed copy.
  void append_n_reversed_unchecked(std::span<const BlockId> blocks) {
    push_unchecked<false, true>(blocks);
  }
  void prepend_n_reversed_unchecked(std::span<const BlockId> blocks) {
    push_unchecked<true, true>(blocks);
  }

  // prepend_n_unchecked(blocks) if every block is not free, is listed once and keep(b) holds,
  // else pushes nothing; returns whether it pushed. Blocks must be in [0, num_blocks). keep is
  // called on the blocks last to first, in the same pass that writes the entries (BlockPool
  // checks its per-block state there: one pass over the ids), up to the first refusal. The pass
  // decides "free or listed twice" from b's recorded position alone in the common case (see
  // push_if_all); a position that could mean either costs one more load. Refusal leaves the
  // queue as it was: the entries written lie outside [head_, tail_), and the positions written
  // belong to blocks that are not free, for which a position means nothing (Q2).
  template <class Keep>
  bool prepend_n_if_all(std::span<const BlockId> blocks, Keep&& keep) {
    return push_if_all(blocks, keep);
  }

  // The same at the tail: append_n_unchecked(blocks) if every block is not free, is listed once
  // and keep(b) holds, else pushes nothing; keep is called first to last. unappend_n(n) takes
  // back the n blocks the last append pushed, when nothing was pushed or popped since (BlockPool
  // frees a list in two parts and undoes the first when the second is refused).
  // kCheckFree false: the caller guarantees every block is not free and listed once (BlockPool::
  // free_held_blocks), so only keep(b) can refuse one.
  template <bool kCheckFree = true, class Keep>
  bool append_n_if_all(std::span<const BlockId> blocks, Keep&& keep);
  void unappend_n(size_t n) {
    tail_ -= static_cast<uint32_t>(n);
    num_free_blocks_ -= static_cast<int32_t>(n);
  }

  // Head-to-tail snapshot (tests and diagnostics).
  std::vector<BlockId> get_all_free_blocks() const;

  // Throws std::logic_error naming the first broken invariant (Q1..Q4).
  void check_invariants() const;

  // Ring slots (tests: compaction and wrap-around are exercised at this size).
  uint32_t capacity() const { return mask_ + 1; }

 private:
  static constexpr BlockId kRemoved = -1;
  // The pops' fast path: with no tombstones the first n blocks are the next n ring entries, one
  // run or two at the ring's end. Removes them, calls take(run, len) for each run in order and
  // returns true; with tombstones changes nothing and returns false. The head moves before take
  // runs, from locals: take's stores could alias the members as far as the compiler knows.
  template <class Take>
  bool pop_head_runs(int32_t n, Take&& take) {
    if (tail_ - head_ != static_cast<uint32_t>(num_free_blocks_)) return false;
    const auto un = static_cast<uint32_t>(n);
    const uint32_t start = head_ & mask_;
    const uint32_t first_run = std::min(un, mask_ + 1 - start);
    const BlockId* const ring = ring_.data();
    head_ += un;
    num_free_blocks_ -= n;
    take(ring + start, first_run);
    take(ring, un - first_run);
    return true;
  }
  // popleft_n over tombstones (dst as in popleft_n).
  void popleft_n_slow(int32_t n, BlockId* dst);
  [[noreturn]] static void throw_not_enough_free(int32_t n, int32_t free);
  // Makes tail_ - head_ + k <= capacity, compacting when needed.
  void make_room(size_t k) {
    if (tail_ - head_ + k > mask_ + 1) [[unlikely]] {
      compact_for(k);
    }
  }
  void compact_for(size_t k);
  void compact();
  void check_pushable(BlockId b) const {
    if (b < 0 || b >= num_blocks_ || contains(b)) [[unlikely]] {
      throw_not_pushable(b);
    }
  }
  [[noreturn]] static void throw_not_pushable(BlockId b);
  // Advances head_ / retreats tail_ over tombstones (restores Q4).
  void trim_ends();

  template <bool kFront>
  void push_n_checked(std::span<const BlockId> blocks) {
    if (blocks.empty()) return;
    make_room(blocks.size());
    // Locals: the id stores could alias the members as far as the compiler knows.
    BlockId* const ring = ring_.data();
    uint32_t* const pos = pos_.data();
    const uint32_t mask = mask_;
    if constexpr (kFront) {
      // Last to first, each at the new head: blocks[0] ends up first, the rest behind it in order.
      // Each block is checked against the ones pushed before it (a duplicate in the list throws).
      uint32_t head = head_;
      for (size_t i = blocks.size(); i-- > 0;) {
        const BlockId b = blocks[i];
        check_pushable(b);
        --head;
        ring[head & mask] = b;
        pos[static_cast<size_t>(b)] = head;
        head_ = head;  // check_pushable of the next block sees this one as free
        ++num_free_blocks_;
      }
    } else {
      uint32_t tail = tail_;
      for (const BlockId b : blocks) {
        check_pushable(b);
        ring[tail & mask] = b;
        pos[static_cast<size_t>(b)] = tail;
        ++tail;
        tail_ = tail;
        ++num_free_blocks_;
      }
    }
  }
  // The unchecked pushes: the new entries take logical positions [first, first + k), one run of
  // ring slots or two at the ring's end, written in one pass with no position arithmetic modulo
  // the capacity.
  template <bool kFront, bool kReversed = false>
  void push_unchecked(std::span<const BlockId> blocks) {
    if (blocks.empty()) return;
    make_room(blocks.size());
    const auto k = static_cast<uint32_t>(blocks.size());
    const uint32_t first = kFront ? head_ - k : tail_;
    const uint32_t start = first & mask_;
    const uint32_t first_run = std::min(k, mask_ + 1 - start);
    // Locals: the stores could alias the members as far as the compiler knows.
    BlockId* const ring = ring_.data();
    uint32_t* const pos = pos_.data();
    const BlockId* const ids = blocks.data();
    // blocks[from, to) (in the push's order) to ring slots slot0, slot0 + 1, ..., four per step
    // (each four read before any is written: the position stores could alias the ids).
    auto run = [&](uint32_t from, uint32_t to, uint32_t slot0) {
      BlockId* dst = ring + slot0;
      uint32_t p = first + from;
      // The push's i-th block: ids[i], or ids[k - 1 - i] reversed, through a pointer that
      // moves one id per block (src[d * j] is the j-th block from here).
      constexpr ptrdiff_t d = kReversed ? -1 : 1;
      const BlockId* src = kReversed ? ids + (k - 1 - from) : ids + from;
      uint32_t left = to - from;
      for (; left >= 4; left -= 4, src += 4 * d, dst += 4, p += 4) {
        const BlockId b0 = src[0], b1 = src[d], b2 = src[2 * d], b3 = src[3 * d];
        dst[0] = b0;
        dst[1] = b1;
        dst[2] = b2;
        dst[3] = b3;
        pos[static_cast<size_t>(b0)] = p;
        pos[static_cast<size_t>(b1)] = p + 1;
        pos[static_cast<size_t>(b2)] = p + 2;
        pos[static_cast<size_t>(b3)] = p + 3;
      }
      for (; left > 0; --left, src += d, ++dst, ++p) {
        const BlockId b = *src;
        *dst = b;
        pos[static_cast<size_t>(b)] = p;
      }
    };
    run(0, first_run, start);
    run(first_run, k, 0);
    if constexpr (kFront) {
      head_ = first;
    } else {
      tail_ = first + k;
    }
    num_free_blocks_ += static_cast<int32_t>(k);
  }
  // prepend_n_if_all. The new entries take logical positions [first, head_): blocks[i] goes to
  // first + i. The pass runs last to first, so when it reaches blocks[i] it has written
  // positions (first + i, head_), which border the window [head_, tail_): a block is refused if
  // its recorded position p lies in the one interval (first + i, tail_) and the slot there holds
  // it -- written earlier in this pass (a block listed twice) or free (Q2). Any other recorded
  // position is stale and proves neither: slots outside the window are rewritten before the
  // window grows over them, so a stale position inside the window or inside this pass's written
  // range is the only way the test needs the slot. In the usual case (a block popped and pushed
  // back, or popped long ago) p lies outside the interval and the pass needs no load beyond
  // pos_[b]; one interval is one unsigned compare per block. The pass stops at the first
  // refusal: the blocks after it in the list were not free, so their overwritten positions mean
  // nothing, and the refused block's position is not written.
  template <class Keep>
  bool push_if_all(std::span<const BlockId> blocks, Keep&& keep) {
    if (blocks.empty()) return true;
    make_room(blocks.size());
    const auto k = static_cast<uint32_t>(blocks.size());
    const uint32_t first = head_ - k;
    const uint32_t start = first & mask_;
    const uint32_t first_run = std::min(k, mask_ + 1 - start);
    const uint32_t tail = tail_;
    // Locals: the stores could alias the members as far as the compiler knows.
    BlockId* const ring = ring_.data();
    uint32_t* const pos = pos_.data();
    const BlockId* const ids = blocks.data();
    const uint32_t mask = mask_;
    // One block b to the ring slot `slot`, where w = its new position - tail_: "p in (position,
    // tail_)" is then one unsigned compare of p - tail_ against w (modulo 2^32 the interval is
    // (w, 2^32)). False on a refusal.
    auto one = [&](const BlockId b, BlockId* slot, uint32_t w) {
      const uint32_t p = pos[static_cast<size_t>(b)];
      if (p - tail > w) [[unlikely]] {
        if (ring[p & mask] == b) return false;
      }
      if (!keep(b)) [[unlikely]] {
        return false;
      }
      *slot = b;
      pos[static_cast<size_t>(b)] = w + tail;
      return true;
    };
    // blocks[from, to) go to ring slots slot0, slot0 + 1, ..., written last to first, four per
    // step (unrolled by hand: the loop has an exit per block, which GCC's unroller skips; the
    // offsets are constants in the addressing); false at the first refusal.
    auto run = [&](size_t from, size_t to, uint32_t slot0) {
      const BlockId* src = ids + to;
      BlockId* dst = ring + slot0 + (to - from);
      const BlockId* const stop = ids + from;
      uint32_t w = first + static_cast<uint32_t>(to) - 1 - tail;
      for (; src - stop >= 4; src -= 4, dst -= 4, w -= 4) {
        if (!one(src[-1], dst - 1, w) || !one(src[-2], dst - 2, w - 1) ||
            !one(src[-3], dst - 3, w - 2) || !one(src[-4], dst - 4, w - 3)) [[unlikely]] {
          return false;
        }
      }
      for (; src != stop; --src, --dst, --w) {
        if (!one(src[-1], dst - 1, w)) [[unlikely]] {
          return false;
        }
      }
      return true;
    };
    // What does not fit before the ring's end continues at slot 0; that run goes first.
    if (!run(first_run, k, 0) || !run(0, first_run, start)) return false;
    head_ = first;
    num_free_blocks_ += static_cast<int32_t>(k);
    return true;
  }

  int32_t num_blocks_;
  int32_t num_free_blocks_ = 0;
  uint32_t mask_ = 0;
  uint32_t head_ = 0;
  uint32_t tail_ = 0;
  std::vector<BlockId> ring_;
  std::vector<uint32_t> pos_;
};

// The new entries take logical positions [tail_, tail_ + k): blocks[i] goes to tail_ + i. When
// the pass reaches blocks[i] it has written positions [tail_, tail_ + i), which border the window
// [head_, tail_) on the other side: a block is refused if its recorded position p lies in
// [head_, tail_ + i) and the slot there holds it (free, Q2, or written earlier in this pass); any
// other position is stale (see push_if_all). On refusal tail_ has not moved: the entries written
// lie outside the window and the positions written belong to blocks that are not free.
template <bool kCheckFree, class Keep>
bool FreeKVCacheBlockQueue::append_n_if_all(std::span<const BlockId> blocks, Keep&& keep) {
  if (blocks.empty()) return true;
  make_room(blocks.size());
  const auto k = static_cast<uint32_t>(blocks.size());
  const uint32_t head = head_;
  const uint32_t tail = tail_;
  // Locals: the stores could alias the members as far as the compiler knows.
  BlockId* const ring = ring_.data();
  uint32_t* const pos = pos_.data();
  const BlockId* const ids = blocks.data();
  const uint32_t mask = mask_;
  // blocks[i] to ring slot `slot` (its logical position tail + i); false on a refusal.
  auto one = [&](uint32_t i, BlockId* slot) {
    const BlockId b = ids[i];
    if constexpr (kCheckFree) {
      const uint32_t p = pos[static_cast<size_t>(b)];
      if (p - head < tail + i - head) [[unlikely]] {
        if (ring[p & mask] == b) return false;
      }
    }
    if (!keep(b)) [[unlikely]] {
      return false;
    }
    *slot = b;
    pos[static_cast<size_t>(b)] = tail + i;
    return true;
  };
  // blocks[from, to) to the ring slots from dst on (no wrap inside a run), four per step
  // (unrolled by hand: the loop has an exit per block, which GCC's unroller skips).
  auto run = [&](uint32_t from, uint32_t to, BlockId* dst) {
    uint32_t i = from;
    for (; to - i >= 4; i += 4, dst += 4) {
      if (!one(i, dst) || !one(i + 1, dst + 1) || !one(i + 2, dst + 2) || !one(i + 3, dst + 3))
          [[unlikely]] {
        return false;
      }
    }
    for (; i < to; ++i, ++dst) {
      if (!one(i, dst)) [[unlikely]] {
        return false;
      }
    }
    return true;
  };
  const uint32_t start = tail & mask;
  const uint32_t first_run = std::min(k, mask + 1 - start);
  if (!run(0, first_run, ring + start) || !run(first_run, k, ring)) return false;
  tail_ = tail + k;
  num_free_blocks_ += static_cast<int32_t>(k);
  return true;
}

}  // namespace kvsim
