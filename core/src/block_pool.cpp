#include "kvsim/core/block_pool.h"

#include <fmt/core.h>

#include <stdexcept>
#include <unordered_set>

namespace kvsim {

// The header promises 32 bytes of metadata per block: two free-queue links, the ref count, the
// hash and the duplicate-chain link (each a parallel array indexed by block id).
static_assert(2 * sizeof(int32_t) + sizeof(int32_t) + sizeof(BlockHash) + sizeof(int32_t) <= 32);

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

}  // namespace

BlockPool::BlockPool(int32_t num_gpu_blocks, bool enable_caching)
    : num_gpu_blocks_(num_gpu_blocks),
      enable_caching_(enable_caching),
      free_block_queue_(validated_num_gpu_blocks(num_gpu_blocks)),
      ref_cnt_(static_cast<size_t>(num_gpu_blocks), 0),
      hash_(static_cast<size_t>(num_gpu_blocks)),
      dup_next_(static_cast<size_t>(num_gpu_blocks), kUnhashed) {
  // The head of the fresh queue is block 0: it becomes the null block.
  const BlockId null_block = free_block_queue_.popleft();
  (void)null_block;
}

double BlockPool::get_usage() const {
  const int32_t total = num_gpu_blocks_ - 1;
  if (total <= 0) return 0.0;
  return 1.0 - static_cast<double>(get_num_free_blocks()) / static_cast<double>(total);
}

void BlockPool::get_new_blocks(int32_t n, std::vector<BlockId>& out) {
  if (n > get_num_free_blocks()) {
    throw std::logic_error(fmt::format("BlockPool::get_new_blocks({}): only {} free blocks", n,
                                       get_num_free_blocks()));
  }
  const size_t first = out.size();
  free_block_queue_.popleft_n(n, out);
  for (size_t i = first; i < out.size(); ++i) {
    const BlockId b = out[i];
    if (enable_caching_) maybe_evict_cached_block(b);
    ref_cnt_[static_cast<size_t>(b)] = 1;
  }
}

void BlockPool::maybe_evict_cached_block(BlockId b) {
  const size_t bi = static_cast<size_t>(b);
  if (dup_next_[bi] == kUnhashed) return;
  auto it = cached_block_hash_to_block_.find(hash_[bi]);
  if (it == cached_block_hash_to_block_.end()) {
    throw std::logic_error(fmt::format("BlockPool: hashed block {} missing from the map", b));
  }
  Chain& chain = it->second;
  if (chain.head == b) {
    chain.head = dup_next_[bi];
    if (chain.head == kChainEnd) {
      cached_block_hash_to_block_.erase(it);
    }
  } else {
    BlockId cur = chain.head;
    while (dup_next_[static_cast<size_t>(cur)] != b) cur = dup_next_[static_cast<size_t>(cur)];
    dup_next_[static_cast<size_t>(cur)] = dup_next_[bi];
    if (chain.tail == b) chain.tail = cur;
  }
  dup_next_[bi] = kUnhashed;
  --num_cached_blocks_;
  ++num_evictions_;
}

std::optional<BlockId> BlockPool::get_cached_block(const BlockHash& hash) const {
  auto it = cached_block_hash_to_block_.find(hash);
  if (it == cached_block_hash_to_block_.end()) return std::nullopt;
  return it->second.head;
}

void BlockPool::cache_full_blocks(std::span<const BlockId> blocks,
                                  std::span<const BlockHash> hashes) {
  if (blocks.size() != hashes.size()) {
    throw std::invalid_argument("BlockPool::cache_full_blocks: blocks and hashes differ in length");
  }
  if (!enable_caching_) return;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const BlockId b = blocks[i];
    const size_t bi = static_cast<size_t>(b);
    if (b == kNullBlockId || dup_next_[bi] != kUnhashed) continue;
    hash_[bi] = hashes[i];
    dup_next_[bi] = kChainEnd;
    auto [it, inserted] = cached_block_hash_to_block_.try_emplace(hashes[i], Chain{b, b});
    if (!inserted) {
      dup_next_[static_cast<size_t>(it->second.tail)] = b;
      it->second.tail = b;
    }
    ++num_cached_blocks_;
  }
}

void BlockPool::touch(std::span<const BlockId> blocks) {
  for (BlockId b : blocks) {
    const size_t bi = static_cast<size_t>(b);
    if (ref_cnt_[bi] == 0 && b != kNullBlockId) free_block_queue_.remove(b);
    ++ref_cnt_[bi];
  }
}

void BlockPool::free_blocks(std::span<const BlockId> ordered_blocks) {
  if (!enable_caching_) {
    // No block carries a hash, so every block reaching 0 is prepended; with a single list the
    // scratch split is unnecessary (this is the allocator's hottest path with caching off).
    scratch_reuse_first_.clear();
    for (BlockId b : ordered_blocks) {
      const size_t bi = static_cast<size_t>(b);
      if (b == kNullBlockId) {
        --ref_cnt_[bi];
        continue;
      }
      if (--ref_cnt_[bi] == 0) {
        scratch_reuse_first_.push_back(b);
      } else if (ref_cnt_[bi] < 0) {
        throw std::logic_error(
            fmt::format("BlockPool::free_blocks: block {} freed more often than allocated", b));
      }
    }
    free_block_queue_.prepend_n(scratch_reuse_first_);
    return;
  }
  scratch_reuse_first_.clear();
  scratch_evict_last_.clear();
  for (BlockId b : ordered_blocks) {
    const size_t bi = static_cast<size_t>(b);
    --ref_cnt_[bi];
    if (b == kNullBlockId) continue;
    if (ref_cnt_[bi] < 0) {
      throw std::logic_error(
          fmt::format("BlockPool::free_blocks: block {} freed more often than allocated", b));
    }
    if (ref_cnt_[bi] == 0) {
      (dup_next_[bi] == kUnhashed ? scratch_reuse_first_ : scratch_evict_last_).push_back(b);
    }
  }
  free_block_queue_.prepend_n(scratch_reuse_first_);
  free_block_queue_.append_n(scratch_evict_last_);
}

bool BlockPool::reset_prefix_cache() {
  if (num_gpu_blocks_ - get_num_free_blocks() != 1) return false;
  cached_block_hash_to_block_.clear();
  for (auto& d : dup_next_) d = kUnhashed;
  num_cached_blocks_ = 0;
  return true;
}

std::optional<BlockHash> BlockPool::block_hash(BlockId b) const {
  if (dup_next_[static_cast<size_t>(b)] == kUnhashed) return std::nullopt;
  return hash_[static_cast<size_t>(b)];
}

void BlockPool::check_invariants() const {
  free_block_queue_.check_invariants();
  if (free_block_queue_.contains(kNullBlockId)) {
    throw std::logic_error("I1: the null block is in the free queue");
  }
  int32_t used = 0;
  for (BlockId b = 1; b < num_gpu_blocks_; ++b) {
    const int32_t rc = ref_cnt_[static_cast<size_t>(b)];
    const bool in_queue = free_block_queue_.contains(b);
    if (rc < 0) throw std::logic_error(fmt::format("I1: block {} has ref_cnt {}", b, rc));
    if (rc > 0 && in_queue) {
      throw std::logic_error(
          fmt::format("I1: block {} has ref_cnt {} but is in the free queue", b, rc));
    }
    if (rc == 0 && !in_queue) {
      throw std::logic_error(
          fmt::format("I1: block {} has ref_cnt 0 but is not in the free queue", b));
    }
    used += rc > 0 ? 1 : 0;
  }
  if (get_num_free_blocks() + used != num_gpu_blocks_ - 1) {
    throw std::logic_error(fmt::format("I2: {} free + {} used != {} usable blocks",
                                       get_num_free_blocks(), used, num_gpu_blocks_ - 1));
  }
  int64_t reachable = 0;
  for (const auto& [hash, chain] : cached_block_hash_to_block_) {
    std::unordered_set<BlockId> seen;
    BlockId last = kChainEnd;
    for (BlockId b = chain.head; b != kChainEnd; b = dup_next_[static_cast<size_t>(b)]) {
      if (b < 0 || b >= num_gpu_blocks_)
        throw std::logic_error("I3: chain links to an invalid block");
      if (!seen.insert(b).second)
        throw std::logic_error(fmt::format("I3: block {} twice in a chain", b));
      if (!(hash_[static_cast<size_t>(b)] == hash)) {
        throw std::logic_error(fmt::format("I3: block {} is in the chain of another hash", b));
      }
      last = b;
      ++reachable;
    }
    if (last != chain.tail) throw std::logic_error("I3: chain tail mismatch");
  }
  int64_t hashed = 0;
  for (BlockId b = 0; b < num_gpu_blocks_; ++b)
    hashed += dup_next_[static_cast<size_t>(b)] != kUnhashed;
  if (hashed != reachable || hashed != num_cached_blocks_) {
    throw std::logic_error(
        fmt::format("I3: {} hashed blocks, {} reachable from the map, counter {}", hashed,
                    reachable, num_cached_blocks_));
  }
  if (!enable_caching_ && hashed != 0)
    throw std::logic_error("I4: caching disabled but blocks hashed");
}

}  // namespace kvsim
