// FreeKVCacheBlockQueue: vLLM's doubly linked free list (kv_cache_utils.py), as index-linked
// arrays instead of heap nodes (8 bytes per block).
//
// Contract / invariants:
//   * The queue holds a subset of block ids [0, num_blocks); each at most once.
//   * `contains(b)` is O(1); every operation except `get_all_free_blocks` is O(1) per block.
//   * The head is "next to be allocated / evicted"; popleft_n returns blocks in head-to-tail
//     order; append_n/prepend_n keep the given order (prepend_n: list[0] becomes the new head).
//   * `num_free_blocks()` equals the number of linked blocks.
#pragma once

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
  bool contains(BlockId b) const { return prev_[static_cast<size_t>(b)] != kNotLinked; }

  // Removes and returns the head. Throws std::logic_error when empty.
  BlockId popleft();
  // Removes the first n blocks and appends them to `out` in head-to-tail order.
  // Throws std::logic_error when fewer than n are free.
  void popleft_n(int32_t n, std::vector<BlockId>& out);
  // O(1) unlink from anywhere in the queue. Throws std::logic_error if `b` is not linked.
  void remove(BlockId b);
  void append(BlockId b);
  void append_n(std::span<const BlockId> blocks);
  void prepend_n(std::span<const BlockId> blocks);

  // Head-to-tail snapshot (tests and diagnostics).
  std::vector<BlockId> get_all_free_blocks() const;

  // Throws std::logic_error describing the first broken link / count mismatch.
  void check_invariants() const;

 private:
  static constexpr int32_t kNotLinked = -2;
  int32_t head_sentinel() const { return num_blocks_; }
  int32_t tail_sentinel() const { return num_blocks_ + 1; }
  void link_before(int32_t node, int32_t b);

  int32_t num_blocks_;
  int32_t num_free_blocks_ = 0;
  // prev_/next_ have num_blocks_ + 2 entries: the two sentinels live at the end.
  std::vector<int32_t> prev_;
  std::vector<int32_t> next_;
};

}  // namespace kvsim
