#include "kvsim/core/free_kv_cache_block_queue.h"

#include <fmt/core.h>

#include <bit>
#include <stdexcept>

namespace kvsim {
[[gnu::cold, gnu::noinline]] void FreeKVCacheBlockQueue::throw_not_enough_free(int32_t n,
                                                                               int32_t free) {
  throw std::logic_error(
      fmt::format("FreeKVCacheBlockQueue::popleft_n({}): only {} free", n, free));
}

// Kept out of line so the push loops stay small.
[[gnu::cold, gnu::noinline]] void FreeKVCacheBlockQueue::throw_not_pushable(BlockId b) {
  throw std::logic_error(
      fmt::format("FreeKVCacheBlockQueue: block {} is already free or out of range", b));
}

namespace {

uint32_t ring_capacity(int32_t num_blocks) {
  if (num_blocks < 0) throw std::invalid_argument("FreeKVCacheBlockQueue: negative size");
  // Slack of a quarter of the blocks bounds compaction to O(1) amortised per removal (header).
  const uint64_t want =
      static_cast<uint64_t>(num_blocks) + static_cast<uint64_t>(num_blocks) / 4 + 16;
  return static_cast<uint32_t>(std::bit_ceil(want));
}

}  // namespace

FreeKVCacheBlockQueue::FreeKVCacheBlockQueue(int32_t num_blocks)
    : num_blocks_(num_blocks),
      num_free_blocks_(num_blocks),
      mask_(ring_capacity(num_blocks) - 1),
      tail_(static_cast<uint32_t>(num_blocks)),
      ring_(static_cast<size_t>(mask_) + 1, kRemoved),
      pos_(static_cast<size_t>(num_blocks)) {
  for (int32_t b = 0; b < num_blocks; ++b) {
    ring_[static_cast<size_t>(b)] = b;
    pos_[static_cast<size_t>(b)] = static_cast<uint32_t>(b);
  }
}

void FreeKVCacheBlockQueue::trim_ends() {
  while (head_ != tail_ && ring_[head_ & mask_] == kRemoved) ++head_;
  while (head_ != tail_ && ring_[(tail_ - 1) & mask_] == kRemoved) --tail_;
}

void FreeKVCacheBlockQueue::popleft_n_slow(int32_t n, BlockId* dst) {
  if (n < 0 || n > num_free_blocks_) [[unlikely]] {
    throw_not_enough_free(n, num_free_blocks_);
  }
  if (n == 0) return;
  // Tombstones inside the popped range are skipped.
  const auto un = static_cast<uint32_t>(n);
  for (uint32_t got = 0; got < un; ++head_) {
    const BlockId b = ring_[head_ & mask_];
    if (b != kRemoved) dst[got++] = b;
  }
  num_free_blocks_ -= n;
  trim_ends();
}

void FreeKVCacheBlockQueue::remove(BlockId b) {
  if (b < 0 || b >= num_blocks_ || !contains(b)) {
    throw std::logic_error(fmt::format("FreeKVCacheBlockQueue::remove: block {} is not free", b));
  }
  ring_[pos_[static_cast<size_t>(b)] & mask_] = kRemoved;
  --num_free_blocks_;
  trim_ends();  // O(1) unless b was at an end next to tombstones (each is trimmed once)
}

void FreeKVCacheBlockQueue::compact_for(size_t k) {
  compact();
  if (tail_ - head_ + k > mask_ + 1) {
    // More blocks than exist would be free: some are duplicates or already free.
    throw std::logic_error(fmt::format(
        "FreeKVCacheBlockQueue: pushing {} blocks onto {} free of {}: duplicates or already free",
        k, num_free_blocks_, num_blocks_));
  }
}

void FreeKVCacheBlockQueue::compact() {
  // Slides the live entries toward the head in place (the write index never passes the read
  // index), keeping their order; the tombstones disappear.
  uint32_t w = head_;
  for (uint32_t r = head_; r != tail_; ++r) {
    const BlockId b = ring_[r & mask_];
    if (b == kRemoved) continue;
    ring_[w & mask_] = b;
    pos_[static_cast<size_t>(b)] = w;
    ++w;
  }
  tail_ = w;
}

void FreeKVCacheBlockQueue::append(BlockId b) {
  append_n(std::span<const BlockId>(&b, 1));
}

std::vector<BlockId> FreeKVCacheBlockQueue::get_all_free_blocks() const {
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(num_free_blocks_));
  for (uint32_t p = head_; p != tail_; ++p) {
    const BlockId b = ring_[p & mask_];
    if (b != kRemoved) out.push_back(b);
  }
  return out;
}

void FreeKVCacheBlockQueue::check_invariants() const {
  const uint32_t used = tail_ - head_;
  if (used > mask_ + 1) {
    throw std::logic_error(fmt::format("Q1: {} ring entries in use, capacity {}", used, mask_ + 1));
  }
  int32_t live = 0;
  for (uint32_t p = head_; p != tail_; ++p) {
    const BlockId b = ring_[p & mask_];
    if (b == kRemoved) continue;
    if (b < 0 || b >= num_blocks_) {
      throw std::logic_error(fmt::format("Q1: ring position {} holds invalid block {}", p, b));
    }
    if (pos_[static_cast<size_t>(b)] != p) {
      // A second entry for b, or a stale one that was not turned into a tombstone.
      throw std::logic_error(fmt::format("Q2: block {} at ring position {} but recorded at {}", b,
                                         p, pos_[static_cast<size_t>(b)]));
    }
    ++live;
  }
  if (live != num_free_blocks_) {
    throw std::logic_error(
        fmt::format("Q3: counter {} but {} live ring entries", num_free_blocks_, live));
  }
  if (used > 0 && (ring_[head_ & mask_] == kRemoved || ring_[(tail_ - 1) & mask_] == kRemoved)) {
    throw std::logic_error("Q4: a tombstone at an end of the ring");
  }
  int32_t marked = 0;
  for (int32_t b = 0; b < num_blocks_; ++b) marked += contains(b) ? 1 : 0;
  if (marked != live) {
    throw std::logic_error(fmt::format("Q2: {} blocks report free, {} live entries", marked, live));
  }
}

}  // namespace kvsim
