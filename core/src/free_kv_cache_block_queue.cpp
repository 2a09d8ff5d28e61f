#include "kvsim/core/free_kv_cache_block_queue.h"

#include <fmt/core.h>

#include <stdexcept>

namespace kvsim {
namespace {

// Kept out of line so the O(1) link operations stay small enough to inline.
[[noreturn, gnu::cold, gnu::noinline]] void throw_bad_link(int32_t b) {
  throw std::logic_error(
      fmt::format("FreeKVCacheBlockQueue: block {} is already free or out of range", b));
}

[[noreturn, gnu::cold, gnu::noinline]] void throw_not_enough_free(int32_t n, int32_t free) {
  throw std::logic_error(
      fmt::format("FreeKVCacheBlockQueue::popleft_n({}): only {} free", n, free));
}

}  // namespace

FreeKVCacheBlockQueue::FreeKVCacheBlockQueue(int32_t num_blocks)
    : num_blocks_(num_blocks),
      prev_(static_cast<size_t>(num_blocks) + 2, kNotLinked),
      next_(static_cast<size_t>(num_blocks) + 2, kNotLinked) {
  if (num_blocks < 0) throw std::invalid_argument("FreeKVCacheBlockQueue: negative size");
  // head <-> 0 <-> 1 <-> ... <-> n-1 <-> tail
  int32_t prev = head_sentinel();
  for (int32_t b = 0; b < num_blocks; ++b) {
    next_[static_cast<size_t>(prev)] = b;
    prev_[static_cast<size_t>(b)] = prev;
    prev = b;
  }
  next_[static_cast<size_t>(prev)] = tail_sentinel();
  prev_[static_cast<size_t>(tail_sentinel())] = prev;
  prev_[static_cast<size_t>(head_sentinel())] = -1;
  next_[static_cast<size_t>(tail_sentinel())] = -1;
  num_free_blocks_ = num_blocks;
}

BlockId FreeKVCacheBlockQueue::popleft() {
  if (num_free_blocks_ == 0)
    throw std::logic_error("FreeKVCacheBlockQueue::popleft: no free blocks");
  const BlockId b = next_[static_cast<size_t>(head_sentinel())];
  remove(b);
  return b;
}

void FreeKVCacheBlockQueue::popleft_n(int32_t n, std::vector<BlockId>& out) {
  if (n < 0 || n > num_free_blocks_) [[unlikely]] {
    throw_not_enough_free(n, num_free_blocks_);
  }
  if (n == 0) return;
  int32_t cur = next_[static_cast<size_t>(head_sentinel())];
  for (int32_t i = 0; i < n; ++i) {
    out.push_back(cur);
    const int32_t nxt = next_[static_cast<size_t>(cur)];
    prev_[static_cast<size_t>(cur)] = kNotLinked;
    next_[static_cast<size_t>(cur)] = kNotLinked;
    cur = nxt;
  }
  next_[static_cast<size_t>(head_sentinel())] = cur;
  prev_[static_cast<size_t>(cur)] = head_sentinel();
  num_free_blocks_ -= n;
}

void FreeKVCacheBlockQueue::remove(BlockId b) {
  if (b < 0 || b >= num_blocks_ || !contains(b)) {
    throw std::logic_error(fmt::format("FreeKVCacheBlockQueue::remove: block {} is not free", b));
  }
  const int32_t p = prev_[static_cast<size_t>(b)];
  const int32_t n = next_[static_cast<size_t>(b)];
  next_[static_cast<size_t>(p)] = n;
  prev_[static_cast<size_t>(n)] = p;
  prev_[static_cast<size_t>(b)] = kNotLinked;
  next_[static_cast<size_t>(b)] = kNotLinked;
  --num_free_blocks_;
}

void FreeKVCacheBlockQueue::link_before(int32_t node, int32_t b) {
  if (b < 0 || b >= num_blocks_ || contains(b)) [[unlikely]] {
    throw_bad_link(b);
  }
  const int32_t p = prev_[static_cast<size_t>(node)];
  next_[static_cast<size_t>(p)] = b;
  prev_[static_cast<size_t>(b)] = p;
  next_[static_cast<size_t>(b)] = node;
  prev_[static_cast<size_t>(node)] = b;
  ++num_free_blocks_;
}

void FreeKVCacheBlockQueue::append(BlockId b) {
  link_before(tail_sentinel(), b);
}

void FreeKVCacheBlockQueue::append_n(std::span<const BlockId> blocks) {
  for (BlockId b : blocks) link_before(tail_sentinel(), b);
}

void FreeKVCacheBlockQueue::prepend_n(std::span<const BlockId> blocks) {
  if (blocks.empty()) return;
  const int32_t first = next_[static_cast<size_t>(head_sentinel())];
  for (BlockId b : blocks) link_before(first, b);
}

std::vector<BlockId> FreeKVCacheBlockQueue::get_all_free_blocks() const {
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(num_free_blocks_));
  for (int32_t cur = next_[static_cast<size_t>(head_sentinel())]; cur != tail_sentinel();
       cur = next_[static_cast<size_t>(cur)]) {
    out.push_back(cur);
  }
  return out;
}

void FreeKVCacheBlockQueue::check_invariants() const {
  int32_t count = 0;
  int32_t prev = head_sentinel();
  for (int32_t cur = next_[static_cast<size_t>(head_sentinel())]; cur != tail_sentinel();
       cur = next_[static_cast<size_t>(cur)]) {
    if (cur < 0 || cur >= num_blocks_) {
      throw std::logic_error(fmt::format("free queue: link to invalid block {}", cur));
    }
    if (prev_[static_cast<size_t>(cur)] != prev) {
      throw std::logic_error(fmt::format("free queue: broken back link at block {}", cur));
    }
    if (++count > num_blocks_) throw std::logic_error("free queue: cycle");
    prev = cur;
  }
  if (prev_[static_cast<size_t>(tail_sentinel())] != prev) {
    throw std::logic_error("free queue: tail back link broken");
  }
  if (count != num_free_blocks_) {
    throw std::logic_error(
        fmt::format("free queue: counter {} but {} linked blocks", num_free_blocks_, count));
  }
  int32_t marked = 0;
  for (int32_t b = 0; b < num_blocks_; ++b) marked += contains(b) ? 1 : 0;
  if (marked != count) {
    throw std::logic_error(
        fmt::format("free queue: {} blocks marked linked, {} reachable", marked, count));
  }
}

}  // namespace kvsim
