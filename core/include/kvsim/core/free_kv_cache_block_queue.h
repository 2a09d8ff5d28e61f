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
// Memory: 4 B per block (pos_) plus 4 B per ring slot, capacity = the smallest power of two >=
// num_blocks * 5/4 + 16 (1.25 to 2.5 slots per block).
#pragma once

#include <algorithm>
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

  // Removes and returns the head. Throws std::logic_error when empty.
  BlockId popleft();
  // Removes the first n blocks and appends them to `out` in head-to-tail order.
  // Throws std::logic_error when fewer than n are free.
  void popleft_n(int32_t n, std::vector<BlockId>& out) {
    if (n > 0 && tail_ - head_ == static_cast<uint32_t>(num_free_blocks_) && n <= num_free_blocks_)
        [[likely]] {
      // No tombstones: the n blocks are one or two contiguous runs of the ring.
      const auto un = static_cast<uint32_t>(n);
      const uint32_t start = head_ & mask_;
      const uint32_t first_run = std::min(un, mask_ + 1 - start);
      const BlockId* ring = ring_.data();
      out.insert(out.end(), ring + start, ring + start + first_run);
      if (first_run < un) out.insert(out.end(), ring, ring + (un - first_run));
      head_ += un;
      num_free_blocks_ -= n;
      return;
    }
    popleft_n_slow(n, out);
  }
  // O(1) removal from anywhere in the queue. Throws std::logic_error if `b` is not free.
  void remove(BlockId b);
  // Pushes keep the given order (prepend_n: blocks[0] becomes the new head). Each throws
  // std::logic_error on a block that is out of range or already free (blocks before it in the
  // list stay pushed: a caller bug, not a recoverable state).
  void append(BlockId b);
  void append_n(std::span<const BlockId> blocks) { push_n<false, true>(blocks); }
  void prepend_n(std::span<const BlockId> blocks) { push_n<true, true>(blocks); }
  // The same without the per-block check, for a caller that guarantees every block is in range,
  // not free and listed once (BlockPool: a block whose ref count just reached 0 was in use, I1).
  // check_invariants() detects a violation afterwards.
  void append_n_unchecked(std::span<const BlockId> blocks) { push_n<false, false>(blocks); }
  void prepend_n_unchecked(std::span<const BlockId> blocks) { push_n<true, false>(blocks); }

  // Head-to-tail snapshot (tests and diagnostics).
  std::vector<BlockId> get_all_free_blocks() const;

  // Throws std::logic_error naming the first broken invariant (Q1..Q4).
  void check_invariants() const;

  // Ring slots (tests: compaction and wrap-around are exercised at this size).
  uint32_t capacity() const { return mask_ + 1; }

 private:
  static constexpr BlockId kRemoved = -1;
  void popleft_n_slow(int32_t n, std::vector<BlockId>& out);
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

  template <bool kFront, bool kChecked>
  void push_n(std::span<const BlockId> blocks) {
    if (blocks.empty()) return;
    make_room(blocks.size());
    // Locals: the id stores could alias the members as far as the compiler knows.
    BlockId* const ring = ring_.data();
    uint32_t* const pos = pos_.data();
    const uint32_t mask = mask_;
    if constexpr (kFront) {
      // Last to first, each at the new head: blocks[0] ends up first, the rest behind it in order.
      uint32_t head = head_;
      for (size_t i = blocks.size(); i-- > 0;) {
        const BlockId b = blocks[i];
        if constexpr (kChecked) check_pushable(b);
        --head;
        ring[head & mask] = b;
        pos[static_cast<size_t>(b)] = head;
        if constexpr (kChecked) {
          head_ = head;  // check_pushable of the next block sees this one as free
          ++num_free_blocks_;
        }
      }
      head_ = head;
    } else {
      uint32_t tail = tail_;
      for (const BlockId b : blocks) {
        if constexpr (kChecked) check_pushable(b);
        ring[tail & mask] = b;
        pos[static_cast<size_t>(b)] = tail;
        ++tail;
        if constexpr (kChecked) {
          tail_ = tail;
          ++num_free_blocks_;
        }
      }
      tail_ = tail;
    }
    if constexpr (!kChecked) num_free_blocks_ += static_cast<int32_t>(blocks.size());
  }

  int32_t num_blocks_;
  int32_t num_free_blocks_ = 0;
  uint32_t mask_ = 0;
  uint32_t head_ = 0;
  uint32_t tail_ = 0;
  std::vector<BlockId> ring_;
  std::vector<uint32_t> pos_;
};

}  // namespace kvsim
