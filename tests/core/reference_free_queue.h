// ReferenceFreeKVCacheBlockQueue: kvsim's former free queue, kept as the reference the fast
// FreeKVCacheBlockQueue is checked against. It is vLLM 0.26's doubly linked free list
// (vllm/v1/core/kv_cache_utils.py FreeKVCacheBlockQueue) as index-linked arrays: one prev and one
// next link per block, two sentinels after the last block. Every operation is the textbook list
// operation, so its order is vLLM's by construction; speed is not a goal here.
//
// Invariants (check_invariants): the links from the head sentinel reach the tail sentinel through
// every free block exactly once, each back link mirrors its forward link, and num_free_blocks()
// equals the number of linked blocks.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvsim/core/types.h"

namespace kvsim::reference {

class ReferenceFreeKVCacheBlockQueue {
 public:
  explicit ReferenceFreeKVCacheBlockQueue(int32_t num_blocks)
      : num_blocks_(num_blocks),
        prev_(static_cast<size_t>(num_blocks) + 2, kNotLinked),
        next_(static_cast<size_t>(num_blocks) + 2, kNotLinked) {
    int32_t prev = head();
    for (int32_t b = 0; b < num_blocks; ++b) {
      link(prev, b);
      prev = b;
    }
    link(prev, tail());
    num_free_blocks_ = num_blocks;
  }

  int32_t num_free_blocks() const { return num_free_blocks_; }
  bool contains(BlockId b) const {
    return b >= 0 && b < num_blocks_ && prev_[static_cast<size_t>(b)] != kNotLinked;
  }

  BlockId popleft() {
    if (num_free_blocks_ == 0) throw std::logic_error("reference popleft: empty");
    const BlockId b = next_[static_cast<size_t>(head())];
    remove(b);
    return b;
  }
  void popleft_n(int32_t n, std::vector<BlockId>& out) {
    if (n < 0 || n > num_free_blocks_) throw std::logic_error("reference popleft_n: too many");
    for (int32_t i = 0; i < n; ++i) out.push_back(popleft());
  }
  void remove(BlockId b) {
    if (!contains(b)) throw std::logic_error("reference remove: not free " + std::to_string(b));
    const int32_t p = prev_[static_cast<size_t>(b)];
    const int32_t n = next_[static_cast<size_t>(b)];
    link(p, n);
    prev_[static_cast<size_t>(b)] = next_[static_cast<size_t>(b)] = kNotLinked;
    --num_free_blocks_;
  }
  void append(BlockId b) { insert_before(tail(), b); }
  void append_n(std::span<const BlockId> blocks) {
    for (BlockId b : blocks) insert_before(tail(), b);
  }
  void prepend_n(std::span<const BlockId> blocks) {
    if (blocks.empty()) return;
    const int32_t first = next_[static_cast<size_t>(head())];
    for (BlockId b : blocks) insert_before(first, b);
  }

  std::vector<BlockId> get_all_free_blocks() const {
    std::vector<BlockId> out;
    for (int32_t c = next_[static_cast<size_t>(head())]; c != tail();
         c = next_[static_cast<size_t>(c)])
      out.push_back(c);
    return out;
  }

  void check_invariants() const {
    int32_t count = 0;
    int32_t prev = head();
    for (int32_t c = next_[static_cast<size_t>(head())]; c != tail();
         c = next_[static_cast<size_t>(c)]) {
      if (c < 0 || c >= num_blocks_) throw std::logic_error("reference: link to invalid block");
      if (prev_[static_cast<size_t>(c)] != prev) throw std::logic_error("reference: back link");
      if (++count > num_blocks_) throw std::logic_error("reference: cycle");
      prev = c;
    }
    if (prev_[static_cast<size_t>(tail())] != prev || count != num_free_blocks_) {
      throw std::logic_error("reference: tail link or count");
    }
  }

 private:
  static constexpr int32_t kNotLinked = -2;
  int32_t head() const { return num_blocks_; }
  int32_t tail() const { return num_blocks_ + 1; }
  void link(int32_t a, int32_t b) {
    next_[static_cast<size_t>(a)] = b;
    prev_[static_cast<size_t>(b)] = a;
  }
  void insert_before(int32_t node, BlockId b) {
    if (b < 0 || b >= num_blocks_ || contains(b)) {
      throw std::logic_error("reference insert: already free or invalid " + std::to_string(b));
    }
    link(prev_[static_cast<size_t>(node)], b);
    link(b, node);
    ++num_free_blocks_;
  }

  int32_t num_blocks_;
  int32_t num_free_blocks_ = 0;
  std::vector<int32_t> prev_;
  std::vector<int32_t> next_;
};

}  // namespace kvsim::reference
