#include "kvsim/core/block_pool.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>

namespace kvsim {

namespace {

// Runs before any member allocates, so an absurd size is an error rather than std::bad_alloc.
int32_t validated_num_gpu_blocks(int32_t n) {
  if (n < 1) {
    throw std::invalid_argument(
        fmt::format("BlockPool: num_gpu_blocks must be >= 1 (the null block), got {}", n));
  }
  if (n > BlockPool::kMaxNumGpuBlocks) {
    throw std::invalid_argument(fmt::format(
        "num_gpu_blocks {} exceeds kvsim's limit of {} blocks (its per-block metadata alone would "
        "need {:.1f} GiB of host memory)",
        n, BlockPool::kMaxNumGpuBlocks, static_cast<double>(n) * 32.0 / (1 << 30)));
  }
  return n;
}

[[noreturn, gnu::cold, gnu::noinline]] void throw_freed_too_often(BlockId b) {
  throw std::logic_error(
      fmt::format("BlockPool::free_blocks: block {} freed more often than allocated", b));
}

}  // namespace

BlockPool::BlockPool(int32_t num_gpu_blocks, bool enable_caching)
    : num_gpu_blocks_(num_gpu_blocks),
      enable_caching_(enable_caching),
      free_block_queue_(validated_num_gpu_blocks(num_gpu_blocks)),
      state_(static_cast<size_t>(num_gpu_blocks)),
      hash_(static_cast<size_t>(num_gpu_blocks)) {
  // The head of the fresh queue is block 0: it becomes the null block, with vLLM's count 0.
  const BlockId null_block = free_block_queue_.popleft();
  state_[static_cast<size_t>(null_block)].extra_refs = -1;
}

void BlockPool::get_new_blocks(int32_t n, std::vector<BlockId>& out) {
  if (n < 0 || n > get_num_free_blocks()) [[unlikely]] {
    throw std::logic_error(fmt::format("BlockPool::get_new_blocks({}): only {} free blocks", n,
                                       get_num_free_blocks()));
  }
  // A free block's extra_refs is 0 (I1), which is what count 1 stores: nothing to write per
  // block. Only a hashed block needs work (its lazy eviction), so with no hashed block anywhere
  // the allocation is a copy of ids out of the queue.
  if (num_cached_blocks_ == 0) {
    free_block_queue_.popleft_n(n, out);
    return;
  }
  const size_t first = out.size();
  out.resize(first + static_cast<size_t>(n));
  BlockId* const dst = out.data() + first;
  // Private blocks (most of what a replay evicts: finished requests' generated blocks) are in no
  // map and no chain: their eviction is inline, counted in a local.
  BlockState* const state = state_.data();
  int64_t private_evictions = 0;
  free_block_queue_.popleft_n(n, dst, [this, state, &private_evictions](BlockId b) {
    BlockState& s = state[static_cast<size_t>(b)];
    if (s.dup_next == kUnhashed) return;
    if (evict_if_private(s)) {
      ++private_evictions;
    } else {
      maybe_evict_cached_block(b);
    }
  });
  num_cached_blocks_ -= private_evictions;
  num_evictions_ += private_evictions;
}

void BlockPool::maybe_evict_cached_block(BlockId b) {
  BlockState& s = state_[static_cast<size_t>(b)];
  if (s.dup_next == kUnhashed) return;
  if (s.dup_next <= kPrivate) {
    // Never in the map: nothing to erase.
  } else if (s.dup_next == b) {
    // The only block under its key (the common case): one store, no lookup.
    cached_block_hash_to_block_.erase(s.map_slot);
  } else {
    evict_from_shared_chain(b);
  }
  s.dup_next = kUnhashed;
  --num_cached_blocks_;
  ++num_evictions_;
}

void BlockPool::evict_from_shared_chain(BlockId b) {
  // Duplicate keys (no de-duplication, as vLLM): unlink b from the cycle; if b was the last
  // inserted (the map's value), its predecessor becomes the last.
  BlockState& s = state_[static_cast<size_t>(b)];
  BlockId pred = s.dup_next;
  while (state_[static_cast<size_t>(pred)].dup_next != b) {
    pred = state_[static_cast<size_t>(pred)].dup_next;
  }
  state_[static_cast<size_t>(pred)].dup_next = s.dup_next;
  if (cached_block_hash_to_block_.value(s.map_slot) == b) {
    cached_block_hash_to_block_.set_value(s.map_slot, pred);
  }
}

std::optional<BlockId> BlockPool::get_cached_block(const BlockHash& hash) const {
  const uint32_t slot = cached_block_hash_to_block_.find(hash, hash_.data());
  if (slot == BlockHashToBlockMap::kNotFound) return std::nullopt;
  // The value is the last inserted block; the first inserted (vLLM's answer) follows it.
  const BlockId last = cached_block_hash_to_block_.value(slot);
  return state_[static_cast<size_t>(last)].dup_next;
}

void BlockPool::cache_full_blocks(std::span<const BlockId> blocks,
                                  std::span<const BlockHash> hashes) {
  if (blocks.size() != hashes.size()) {
    throw std::invalid_argument("BlockPool::cache_full_blocks: blocks and hashes differ in length");
  }
  if (!enable_caching_) return;
  // A rebuild of the map moves slots: every member of a moved chain learns its new slot.
  auto on_move = [this](BlockId last, uint32_t slot) {
    BlockId cur = last;
    do {
      state_[static_cast<size_t>(cur)].map_slot = slot;
      cur = state_[static_cast<size_t>(cur)].dup_next;
    } while (cur != last);
  };
  // The map's home slots are random cache lines: request a batch of them before inserting.
  constexpr size_t kPrefetchAhead = 16;
  for (size_t i = 0; i < std::min(blocks.size(), kPrefetchAhead); ++i) {
    cached_block_hash_to_block_.prefetch(hashes[i]);
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i + kPrefetchAhead < blocks.size()) {
      cached_block_hash_to_block_.prefetch(hashes[i + kPrefetchAhead]);
    }
    const BlockId b = blocks[i];
    BlockState& s = state_[static_cast<size_t>(b)];
    if (b == kNullBlockId || s.dup_next != kUnhashed) continue;
    hash_[static_cast<size_t>(b)] = hashes[i];
    const auto [slot, inserted] =
        cached_block_hash_to_block_.find_or_insert(hashes[i], b, hash_.data(), on_move);
    if (inserted) {
      s.dup_next = b;
    } else {
      // Append after the chain's last block: b becomes the last, the first stays first.
      BlockState& last = state_[static_cast<size_t>(cached_block_hash_to_block_.value(slot))];
      s.dup_next = last.dup_next;
      last.dup_next = b;
      cached_block_hash_to_block_.set_value(slot, b);
    }
    s.map_slot = slot;
    ++num_cached_blocks_;
  }
}

void BlockPool::cache_private_blocks(std::span<const BlockId> blocks,
                                     std::span<const BlockHash> hashes) {
  if (blocks.size() != hashes.size()) {
    throw std::invalid_argument(
        "BlockPool::cache_private_blocks: blocks and hashes differ in length");
  }
  if (!enable_caching_) return;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const BlockId b = blocks[i];
    BlockState& s = state_[static_cast<size_t>(b)];
    if (b == kNullBlockId || s.dup_next != kUnhashed) continue;
    hash_[static_cast<size_t>(b)] = hashes[i];
    s.dup_next = kPrivate;
    ++num_cached_blocks_;
  }
}

void BlockPool::publish_private_blocks(std::span<const BlockId> blocks,
                                       std::span<const BlockHash> hashes) {
  for (size_t i = 0; i < blocks.size(); ++i) {
    const BlockId b = blocks[i];
    BlockState& s = state_[static_cast<size_t>(b)];
    if (s.dup_next > kPrivate) continue;
    if (s.dup_next == kPrivateNoHash) {
      if (i >= hashes.size()) {
        throw std::logic_error(fmt::format(
            "BlockPool::publish_private_blocks: block {} was cached without its hash", b));
      }
      hash_[static_cast<size_t>(b)] = hashes[i];
    }
    // Registered now through the ordinary path (same chain order as eager caching: a key's
    // blocks are published in the order they were cached).
    s.dup_next = kUnhashed;
    --num_cached_blocks_;
    const BlockHash h = hash_[static_cast<size_t>(b)];
    cache_full_blocks(std::span<const BlockId>(&b, 1), std::span<const BlockHash>(&h, 1));
  }
}

void BlockPool::touch(std::span<const BlockId> blocks) {
  for (BlockId b : blocks) {
    BlockState& s = state_[static_cast<size_t>(b)];
    if (b == kNullBlockId) {
      ++s.extra_refs;
    } else if (free_block_queue_.contains(b)) {
      free_block_queue_.remove(b);  // count 0 -> 1: extra_refs stays 0
    } else {
      num_shared_blocks_ += s.extra_refs++ == 0 ? 1 : 0;
    }
  }
}

// Inlined into free_blocks: a second call level is a measurable part of a one-block free.
template <bool kCheckState>
[[gnu::always_inline]] inline bool BlockPool::free_blocks_if_all_unhashed(
    std::span<const BlockId> ordered_blocks) {
  // The queue refuses a block that is already free or listed twice (a double free, left to the
  // general path's error); the predicate refuses the null block, a shared block (its count
  // stays above 0) and a hashed one (it is appended, not prepended). Nothing is written on
  // refusal, so there is nothing to undo.
  if constexpr (kCheckState) {
    const BlockState* const state = state_.data();
    return free_block_queue_.prepend_n_if_all(ordered_blocks, [state](BlockId b) {
      // extra_refs == 0 and dup_next == kUnhashed: the two adjacent fields in one load.
      static_assert(offsetof(BlockState, dup_next) == offsetof(BlockState, extra_refs) + 4);
      uint64_t both;
      std::memcpy(&both, &state[static_cast<size_t>(b)].extra_refs, sizeof both);
      constexpr uint64_t kWant = static_cast<uint64_t>(static_cast<uint32_t>(kUnhashed)) << 32;
      return (b != kNullBlockId) & (both == kWant);
    });
  } else {
    return free_block_queue_.prepend_n_if_all(ordered_blocks,
                                              [](BlockId b) { return b != kNullBlockId; });
  }
}

void BlockPool::free_blocks(std::span<const BlockId> ordered_blocks) {
  free_blocks_impl<false>(ordered_blocks);
}

void BlockPool::free_held_blocks(std::span<const BlockId> ordered_blocks) {
  free_blocks_impl<true>(ordered_blocks);
}

void BlockPool::free_table_blocks(std::span<const BlockId> table, size_t num_hashed) {
  if (num_shared_blocks_ != 0) {
    throw std::logic_error(fmt::format(
        "BlockPool::free_table_blocks: {} blocks are shared (free_held_blocks frees such a table)",
        num_shared_blocks_));
  }
  // free_blocks_if_unhashed_then_hashed's two pushes of the reversed table, in its order,
  // without its per-block tests: the hashed blocks appended, then the others prepended.
  free_block_queue_.append_n_reversed_unchecked(table.first(num_hashed));
  free_block_queue_.prepend_n_reversed_unchecked(table.subspan(num_hashed));
}

template <bool kHeld>
void BlockPool::free_blocks_impl(std::span<const BlockId> ordered_blocks) {
  if (ordered_blocks.empty()) return;
  // The common case: every listed block drops from 1 to 0, none is the null block and none is
  // hashed. Then nothing is appended and the list itself, in order, goes to the head: one pass
  // that writes the ring entries and queue positions, with no scratch list and no second pass.
  // With no shared block and no hashed block in the pool (caching off without prefix sharing,
  // or caching on before anything is cached) the pass reads no per-block state at all.
  // Otherwise it is tried only when the last listed block is unhashed: a finished request lists
  // its table in reverse, so a hashed last block (its first, full block) says the general path
  // is needed, without paying for a failed try.
  if (num_shared_blocks_ == 0 && num_cached_blocks_ == 0) {
    if (free_blocks_if_all_unhashed<false>(ordered_blocks)) [[likely]]
      return;
  } else if (!is_cached(ordered_blocks.back())) {
    if (free_blocks_if_all_unhashed<true>(ordered_blocks)) return;
  } else if (free_blocks_if_unhashed_then_hashed<kHeld>(ordered_blocks)) {
    return;
  }
  free_blocks_general(ordered_blocks);
}

template <bool kHeld>
bool BlockPool::free_blocks_if_unhashed_then_hashed(std::span<const BlockId> ordered_blocks) {
  size_t m = 0;
  while (m < ordered_blocks.size() && ordered_blocks[m] != kNullBlockId &&
         !is_cached(ordered_blocks[m])) {
    ++m;
  }
  const std::span<const BlockId> hashed = ordered_blocks.subspan(m);
  const BlockState* const state = state_.data();
  // extra_refs == 0 and a hash (dup_next != kUnhashed); never the null block.
  const bool appended = free_block_queue_.append_n_if_all<!kHeld>(hashed, [state](BlockId b) {
    const BlockState& s = state[static_cast<size_t>(b)];
    return (b != kNullBlockId) & (s.extra_refs == 0) & (s.dup_next != kUnhashed);
  });
  if (!appended) return false;
  if (m == 0 || free_blocks_if_all_unhashed<true>(ordered_blocks.first(m))) return true;
  free_block_queue_.unappend_n(hashed.size());
  return false;
}

void BlockPool::free_blocks_general(std::span<const BlockId> ordered_blocks) {
  // A block reaching count 0 was allocated, hence not free (I1), and is listed for the queue
  // once (a second listing in this call finds it marked): the queue's unchecked pushes apply.
  scratch_reuse_first_.resize(ordered_blocks.size());
  BlockId* reuse_first = scratch_reuse_first_.data();
  size_t num_reuse_first = 0;
  scratch_evict_last_.resize(ordered_blocks.size());
  BlockId* evict_last = scratch_evict_last_.data();
  size_t num_evict_last = 0;
  // A double free leaves the pool as if the call stopped before the offending block: blocks
  // already queued by this call are pushed, then the error is raised.
  auto push_queued = [&] {
    for (size_t i = 0; i < num_reuse_first; ++i) {
      state_[static_cast<size_t>(reuse_first[i])].extra_refs = 0;
    }
    for (size_t i = 0; i < num_evict_last; ++i) {
      state_[static_cast<size_t>(evict_last[i])].extra_refs = 0;
    }
    free_block_queue_.prepend_n_unchecked(std::span(reuse_first, num_reuse_first));
    free_block_queue_.append_n_unchecked(std::span(evict_last, num_evict_last));
  };
  for (BlockId b : ordered_blocks) {
    BlockState& s = state_[static_cast<size_t>(b)];
    if (b == kNullBlockId) {
      --s.extra_refs;  // vLLM lets the null block's count go anywhere; it is never queued
      continue;
    }
    if (s.extra_refs > 0) {
      num_shared_blocks_ -= --s.extra_refs == 0 ? 1 : 0;
      continue;
    }
    if (s.extra_refs == kQueuedThisCall || free_block_queue_.contains(b)) [[unlikely]] {
      push_queued();
      throw_freed_too_often(b);
    }
    s.extra_refs = kQueuedThisCall;
    // Branch-free split: both lists get the id, only the right one keeps it.
    const bool hashed = s.dup_next != kUnhashed;
    reuse_first[num_reuse_first] = b;
    evict_last[num_evict_last] = b;
    num_reuse_first += hashed ? 0 : 1;
    num_evict_last += hashed ? 1 : 0;
  }
  push_queued();
}

bool BlockPool::reset_prefix_cache() {
  if (num_gpu_blocks_ - get_num_free_blocks() != 1) return false;
  cached_block_hash_to_block_.clear();
  for (auto& st : state_) st.dup_next = kUnhashed;
  num_cached_blocks_ = 0;
  return true;
}

std::optional<BlockHash> BlockPool::block_hash(BlockId b) const {
  if (!is_cached(b) || state_[static_cast<size_t>(b)].dup_next == kPrivateNoHash)
    return std::nullopt;
  return hash_[static_cast<size_t>(b)];
}

void BlockPool::check_invariants() const {
  free_block_queue_.check_invariants();
  if (free_block_queue_.contains(kNullBlockId)) {
    throw std::logic_error("I1: the null block is in the free queue");
  }
  int32_t used = 0;
  int32_t shared = 0;
  for (BlockId b = 1; b < num_gpu_blocks_; ++b) {
    const int32_t extra = state_[static_cast<size_t>(b)].extra_refs;
    const bool in_queue = free_block_queue_.contains(b);
    if (in_queue && extra != 0) {
      throw std::logic_error(
          fmt::format("I1: block {} is in the free queue with extra_refs {}", b, extra));
    }
    if (!in_queue && extra < 0) {
      throw std::logic_error(fmt::format("I1: allocated block {} has extra_refs {}", b, extra));
    }
    used += in_queue ? 0 : 1;
    shared += !in_queue && extra > 0 ? 1 : 0;
  }
  if (get_num_free_blocks() + used != num_gpu_blocks_ - 1) {
    throw std::logic_error(fmt::format("I2: {} free + {} used != {} usable blocks",
                                       get_num_free_blocks(), used, num_gpu_blocks_ - 1));
  }
  if (shared != num_shared_blocks_) {
    throw std::logic_error(
        fmt::format("I2: {} shared blocks, counter {}", shared, num_shared_blocks_));
  }
  cached_block_hash_to_block_.check_invariants(hash_.data());
  int64_t reachable = 0;
  std::vector<uint8_t> seen(static_cast<size_t>(num_gpu_blocks_), 0);
  cached_block_hash_to_block_.for_each([&](uint32_t slot, BlockId last) {
    if (last < 0 || last >= num_gpu_blocks_) {
      throw std::logic_error(fmt::format("I3: map slot {} holds invalid block {}", slot, last));
    }
    const BlockHash& key = hash_[static_cast<size_t>(last)];
    BlockId cur = last;
    do {
      if (cur < 0 || cur >= num_gpu_blocks_) {
        throw std::logic_error("I3: chain links to an invalid block");
      }
      const BlockState& s = state_[static_cast<size_t>(cur)];
      if (seen[static_cast<size_t>(cur)]++ != 0) {
        throw std::logic_error(fmt::format("I3: block {} reached twice from the map", cur));
      }
      if (!(hash_[static_cast<size_t>(cur)] == key)) {
        throw std::logic_error(fmt::format("I3: block {} is in the chain of another hash", cur));
      }
      if (s.map_slot != slot) {
        throw std::logic_error(
            fmt::format("I3: block {} records map slot {}, chain is at {}", cur, s.map_slot, slot));
      }
      ++reachable;
      cur = s.dup_next;
    } while (cur != last);
  });
  int64_t hashed = 0;
  int64_t private_blocks = 0;
  for (BlockId b = 0; b < num_gpu_blocks_; ++b) {
    hashed += is_cached(b) ? 1 : 0;
    private_blocks += is_private(b) ? 1 : 0;
  }
  if (private_blocks > 0 && (!enable_caching_ || is_private(kNullBlockId))) {
    throw std::logic_error("I3: a private block with caching off, or the null block private");
  }
  if (hashed != reachable + private_blocks || hashed != num_cached_blocks_) {
    throw std::logic_error(
        fmt::format("I3: {} hashed blocks, {} reachable from the map + {} private, counter {}",
                    hashed, reachable, private_blocks, num_cached_blocks_));
  }
  if (!enable_caching_ && hashed != 0)
    throw std::logic_error("I4: caching disabled but blocks hashed");
}

}  // namespace kvsim
