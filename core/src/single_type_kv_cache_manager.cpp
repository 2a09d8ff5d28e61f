#include "kvsim/core/single_type_kv_cache_manager.h"

#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

namespace kvsim {

SingleTypeKVCacheManager::SingleTypeKVCacheManager(const KVCacheSpec& spec, BlockPool& block_pool,
                                                   bool enable_caching, int32_t kv_cache_group_id,
                                                   int64_t max_admission_blocks_per_request,
                                                   int32_t prefix_cache_retention_interval)
    : spec_(spec),
      block_pool_(block_pool),
      enable_caching_(enable_caching),
      group_id_(kv_cache_group_id),
      max_admission_blocks_(max_admission_blocks_per_request),
      retention_interval_(prefix_cache_retention_interval) {
  if (spec.block_size <= 0) {
    throw std::invalid_argument(fmt::format("KV cache group {}: block_size must be > 0, got {}",
                                            kv_cache_group_id, spec.block_size));
  }
  // vLLM's reachable_block_mask returns None (cache everything) for R == None, and for R > 0
  // when a window hit needs at least a whole segment.
  if (spec.kind == KVCacheSpecKind::kSlidingWindow && prefix_cache_retention_interval >= 0) {
    retention_need_ = cdiv(int64_t{spec.sliding_window} - 1, int64_t{spec.block_size});
    retention_segment_blocks_ = prefix_cache_retention_interval / spec.block_size;
    sparse_retention_ =
        prefix_cache_retention_interval == 0 || retention_need_ < retention_segment_blocks_;
  }
}

const SingleTypeKVCacheManager::RequestState* SingleTypeKVCacheManager::find(
    int64_t request_id) const {
  if (request_id < 0 || static_cast<size_t>(request_id) >= req_to_blocks_.size()) return nullptr;
  return &req_to_blocks_[static_cast<size_t>(request_id)];
}

SingleTypeKVCacheManager::RequestState& SingleTypeKVCacheManager::state_for(int64_t request_id) {
  if (request_id < 0) {
    throw std::invalid_argument(
        fmt::format("KV cache group {}: negative request id {}", group_id_, request_id));
  }
  if (static_cast<size_t>(request_id) >= req_to_blocks_.size()) {
    req_to_blocks_.resize(std::max(static_cast<size_t>(request_id) + 1, req_to_blocks_.size() * 2));
  }
  return req_to_blocks_[static_cast<size_t>(request_id)];
}

bool SingleTypeKVCacheManager::has_num_cached_block(int64_t request_id) const {
  const RequestState* st = find(request_id);
  return st != nullptr && st->num_cached_block >= 0;
}

std::span<const BlockId> SingleTypeKVCacheManager::get_blocks(int64_t request_id) const {
  const RequestState* st = find(request_id);
  if (st == nullptr) return {};
  return st->blocks;
}

bool SingleTypeKVCacheManager::get_cached_block(const BlockHash& hash,
                                                std::span<const int32_t> group_ids,
                                                std::span<BlockId> out) const {
  for (size_t i = 0; i < group_ids.size(); ++i) {
    const auto hit =
        block_pool_.get_cached_block(make_block_hash_with_group_id(hash, group_ids[i]));
    if (!hit) return false;
    out[i] = *hit;
  }
  return true;
}

int64_t SingleTypeKVCacheManager::get_num_blocks_to_allocate(
    int64_t request_id, int64_t num_tokens, std::span<const BlockId> new_computed_blocks,
    int64_t total_computed_tokens, bool apply_admission_cap) const {
  const int64_t bs = spec_.block_size;
  int64_t num_required_blocks = cdiv(num_tokens, bs);
  if (apply_admission_cap && max_admission_blocks_ >= 0) {
    num_required_blocks = std::min(num_required_blocks, max_admission_blocks_);
  }
  const RequestState* st = find(request_id);
  const int64_t num_req_blocks = st == nullptr ? 0 : static_cast<int64_t>(st->blocks.size());
  if (st != nullptr && st->num_cached_block >= 0) {
    // A running request has no new prefix hits.
    return std::max<int64_t>(num_required_blocks - num_req_blocks, 0);
  }
  const int64_t num_skipped_blocks = get_num_skipped_tokens(total_computed_tokens) / bs;
  const int64_t num_local_computed_blocks =
      static_cast<int64_t>(new_computed_blocks.size()) + num_req_blocks;
  const int64_t num_new_blocks = std::max<int64_t>(
      num_required_blocks - std::max(num_skipped_blocks, num_local_computed_blocks), 0);
  // Skipped hit blocks are never touched; the others leave the free queue if they are in it.
  const auto skip_hits = static_cast<size_t>(std::clamp<int64_t>(
      num_skipped_blocks - num_req_blocks, 0, static_cast<int64_t>(new_computed_blocks.size())));
  int64_t num_evictable = 0;
  for (size_t i = skip_hits; i < new_computed_blocks.size(); ++i) {
    const BlockId b = new_computed_blocks[i];
    if (b != kNullBlockId && block_pool_.is_free(b)) ++num_evictable;
  }
  return num_new_blocks + num_evictable;
}

void SingleTypeKVCacheManager::add_local_computed_blocks(
    int64_t request_id, std::span<const BlockId> new_computed_blocks,
    int64_t num_local_computed_tokens) {
  RequestState& st = state_for(request_id);
  if (!st.blocks.empty()) {
    throw std::logic_error(fmt::format("KV cache group {}: request {} given prefix hits twice",
                                       group_id_, request_id));
  }
  const int64_t num_skipped_blocks =
      get_num_skipped_tokens(num_local_computed_tokens) / spec_.block_size;
  const auto skip = static_cast<size_t>(
      std::min<int64_t>(num_skipped_blocks, static_cast<int64_t>(new_computed_blocks.size())));
  const std::span<const BlockId> kept = new_computed_blocks.subspan(skip);
  if (enable_caching_) block_pool_.touch(kept);
  st.blocks.assign(static_cast<size_t>(std::max<int64_t>(num_skipped_blocks, 0)), kNullBlockId);
  st.blocks.insert(st.blocks.end(), kept.begin(), kept.end());
  st.num_cached_block = static_cast<int32_t>(st.blocks.size());
  st.num_hit_blocks = st.num_cached_block;
  st.retained_prompt_tokens = -1;
  st.retained_junction = 0;
  num_table_blocks_ += static_cast<int64_t>(st.blocks.size());
  for (BlockId b : st.blocks) num_null_blocks_ += b == kNullBlockId;
}

void SingleTypeKVCacheManager::allocate_new_blocks(int64_t request_id, int64_t num_tokens,
                                                   std::vector<BlockId>& out) {
  RequestState& st = state_for(request_id);
  const int64_t n = cdiv(num_tokens, spec_.block_size) - static_cast<int64_t>(st.blocks.size());
  if (n <= 0) return;
  const size_t first = out.size();
  block_pool_.get_new_blocks(static_cast<int32_t>(n), out);
  st.blocks.insert(st.blocks.end(), out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  num_table_blocks_ += n;
}

void SingleTypeKVCacheManager::cache_blocks(const Request& request, int64_t num_tokens) {
  if (!enable_caching_ || request.hash_block_size == 0) return;
  if (request.hash_block_size != spec_.block_size) {
    throw std::logic_error(
        fmt::format("cache_blocks: request {} hashes {}-token blocks, group {} "
                    "uses {}",
                    request.request_id, request.hash_block_size, group_id_, spec_.block_size));
  }
  RequestState* st =
      request.request_id >= 0 && static_cast<size_t>(request.request_id) < req_to_blocks_.size()
          ? &req_to_blocks_[static_cast<size_t>(request.request_id)]
          : nullptr;
  if (st == nullptr) return;
  const int64_t num_cached = std::max(st->num_cached_block, 0);
  const int64_t num_full = num_tokens / spec_.block_size;
  // vLLM returns before recording anything when nothing new is full.
  if (num_cached >= num_full) return;
  if (static_cast<int64_t>(request.block_hashes.size()) < num_full ||
      static_cast<int64_t>(st->blocks.size()) < num_full) {
    throw std::logic_error(fmt::format(
        "cache_blocks: request {} has {} hashes and {} blocks in group {}, needs {}",
        request.request_id, request.block_hashes.size(), st->blocks.size(), group_id_, num_full));
  }
  scratch_blocks_.clear();
  scratch_hashes_.clear();
  const int32_t prompt = request.num_prompt_tokens;
  const int32_t junction = request.shared_prefix_boundary;
  if (sparse_retention_) {
    // T3's record of the boundaries the mask used (see the header).
    if (st->retained_prompt_tokens == -1) {
      st->retained_prompt_tokens = prompt;
      st->retained_junction = junction;
    } else if (st->retained_prompt_tokens != prompt || st->retained_junction != junction) {
      st->retained_prompt_tokens = -2;
    }
  }
  for (int64_t i = num_cached; i < num_full; ++i) {
    const BlockId b = st->blocks[static_cast<size_t>(i)];
    if (b == kNullBlockId) continue;
    if (sparse_retention_ && !retains_block(i, prompt, junction)) continue;
    scratch_blocks_.push_back(b);
    scratch_hashes_.push_back(
        make_block_hash_with_group_id(request.block_hashes[static_cast<size_t>(i)], group_id_));
  }
  block_pool_.cache_full_blocks(scratch_blocks_, scratch_hashes_);
  st->num_cached_block = static_cast<int32_t>(num_full);
}

void SingleTypeKVCacheManager::free(int64_t request_id) {
  if (request_id < 0 || static_cast<size_t>(request_id) >= req_to_blocks_.size()) return;
  RequestState& st = req_to_blocks_[static_cast<size_t>(request_id)];
  scratch_blocks_.assign(st.blocks.rbegin(), st.blocks.rend());
  block_pool_.free_blocks(scratch_blocks_);
  num_table_blocks_ -= static_cast<int64_t>(st.blocks.size());
  for (BlockId b : st.blocks) num_null_blocks_ -= b == kNullBlockId;
  st.blocks.clear();
  st.num_cached_block = -1;
  st.num_hit_blocks = 0;
  st.retained_prompt_tokens = -1;
  st.retained_junction = 0;
}

void SingleTypeKVCacheManager::remove_skipped_blocks(int64_t request_id,
                                                     int64_t processed_computed_tokens) {
  const int64_t num_skipped_tokens = get_num_skipped_tokens(processed_computed_tokens);
  if (num_skipped_tokens <= 0) return;
  if (request_id < 0 || static_cast<size_t>(request_id) >= req_to_blocks_.size()) return;
  std::vector<BlockId>& blocks = req_to_blocks_[static_cast<size_t>(request_id)].blocks;
  // The window may reach tokens without blocks yet: cap at the table.
  const int64_t last =
      std::min<int64_t>(num_skipped_tokens / spec_.block_size, static_cast<int64_t>(blocks.size()));
  scratch_blocks_.clear();
  for (int64_t i = last - 1; i >= 0; --i) {
    BlockId& b = blocks[static_cast<size_t>(i)];
    if (b == kNullBlockId) break;  // everything before was removed by an earlier call
    scratch_blocks_.push_back(b);
    b = kNullBlockId;
  }
  if (scratch_blocks_.empty()) return;
  num_null_blocks_ += static_cast<int64_t>(scratch_blocks_.size());
  num_skipped_blocks_freed_ += static_cast<int64_t>(scratch_blocks_.size());
  block_pool_.free_blocks(scratch_blocks_);
}

void SingleTypeKVCacheManager::check_invariants(std::vector<int32_t>& refs) const {
  int64_t total = 0;
  int64_t nulls = 0;
  for (size_t r = 0; r < req_to_blocks_.size(); ++r) {
    const RequestState& st = req_to_blocks_[r];
    bool in_null_prefix = true;
    std::unordered_set<BlockId> seen;
    for (size_t i = 0; i < st.blocks.size(); ++i) {
      const BlockId b = st.blocks[i];
      if (b == kNullBlockId) {
        if (!in_null_prefix || spec_.kind == KVCacheSpecKind::kFullAttention) {
          throw std::logic_error(fmt::format(
              "T1: group {} request {} has a null block at #{} after a real block or in a "
              "full-attention table",
              group_id_, r, i));
        }
        ++nulls;
        continue;
      }
      in_null_prefix = false;
      if (b < 0 || static_cast<size_t>(b) >= refs.size()) {
        throw std::logic_error(
            fmt::format("T2: group {} request {} lists invalid block {}", group_id_, r, b));
      }
      if (!seen.insert(b).second) {
        throw std::logic_error(
            fmt::format("T2: group {} request {} lists block {} twice", group_id_, r, b));
      }
      ++refs[static_cast<size_t>(b)];
    }
    if (st.num_cached_block > static_cast<int32_t>(st.blocks.size())) {
      throw std::logic_error(fmt::format("T3: group {} request {} num_cached_block {} > {} blocks",
                                         group_id_, r, st.num_cached_block, st.blocks.size()));
    }
    if (enable_caching_ && !(sparse_retention_ && st.retained_prompt_tokens == -2)) {
      for (int32_t i = 0; i < st.num_cached_block; ++i) {
        const BlockId b = st.blocks[static_cast<size_t>(i)];
        if (b == kNullBlockId) continue;
        const bool kept = !sparse_retention_ || i < st.num_hit_blocks ||
                          (st.retained_prompt_tokens >= 0 &&
                           retains_block(i, st.retained_prompt_tokens, st.retained_junction));
        if (kept != block_pool_.is_cached(b)) {
          throw std::logic_error(fmt::format(
              "T3: group {} request {} block #{} ({}) should {}be cached (retention interval {})",
              group_id_, r, i, b, kept ? "" : "not ", retention_interval_));
        }
      }
    }
    total += static_cast<int64_t>(st.blocks.size());
  }
  if (total != num_table_blocks_ || nulls != num_null_blocks_) {
    throw std::logic_error(
        fmt::format("T4: group {} counters: {} table blocks ({} counted), {} "
                    "null ({} counted)",
                    group_id_, num_table_blocks_, total, num_null_blocks_, nulls));
  }
}

// ---------------------------------------------------------------------------------------------

int64_t FullAttentionManager::find_longest_cache_hit(std::span<const BlockHash> block_hashes,
                                                     int64_t max_length,
                                                     std::span<const int32_t> group_ids,
                                                     std::span<std::vector<BlockId>> out) const {
  for (auto& v : out) v.clear();
  const int64_t max_blocks =
      std::min<int64_t>(max_length / spec_.block_size, static_cast<int64_t>(block_hashes.size()));
  std::vector<BlockId> row(group_ids.size());
  for (int64_t i = 0; i < max_blocks; ++i) {
    if (!get_cached_block(block_hashes[static_cast<size_t>(i)], group_ids, row)) break;
    for (size_t g = 0; g < out.size(); ++g) out[g].push_back(row[g]);
  }
  return static_cast<int64_t>(out.empty() ? 0 : out[0].size()) * spec_.block_size;
}

int64_t SlidingWindowManager::get_num_skipped_tokens(int64_t num_computed_tokens) const {
  return std::max<int64_t>(0, num_computed_tokens - spec_.sliding_window + 1);
}

int64_t SlidingWindowManager::find_longest_cache_hit(std::span<const BlockHash> block_hashes,
                                                     int64_t max_length,
                                                     std::span<const int32_t> group_ids,
                                                     std::span<std::vector<BlockId>> out) const {
  const int64_t bs = spec_.block_size;
  const int64_t contiguous_needed = cdiv(spec_.sliding_window - 1, bs);
  const int64_t max_num_blocks =
      std::min<int64_t>(max_length / bs, static_cast<int64_t>(block_hashes.size()));
  for (auto& v : out) v.assign(static_cast<size_t>(max_num_blocks), kNullBlockId);
  std::vector<BlockId> row(group_ids.size());
  int64_t num_contiguous = 0;
  bool match_found = false;
  for (int64_t i = max_num_blocks - 1; i >= 0; --i) {
    if (get_cached_block(block_hashes[static_cast<size_t>(i)], group_ids, row)) {
      for (size_t g = 0; g < out.size(); ++g) out[g][static_cast<size_t>(i)] = row[g];
      ++num_contiguous;
      if (num_contiguous >= contiguous_needed) {
        // Trim the blocks after the run: [NULL, NULL, 8, 3, NULL, 9] -> [NULL, NULL, 8, 3].
        for (auto& v : out) v.resize(static_cast<size_t>(i + num_contiguous));
        match_found = true;
        break;
      }
    } else {
      num_contiguous = 0;
    }
  }
  // Without a full window, the run of cached blocks from the start is still a hit.
  if (!match_found) {
    for (auto& v : out) v.resize(static_cast<size_t>(num_contiguous));
  }
  return static_cast<int64_t>(out.empty() ? 0 : out[0].size()) * bs;
}

int64_t ChunkedLocalAttentionManager::get_num_skipped_tokens(int64_t num_computed_tokens) const {
  return num_computed_tokens / spec_.attention_chunk_size * spec_.attention_chunk_size;
}

int64_t ChunkedLocalAttentionManager::find_longest_cache_hit(
    std::span<const BlockHash> block_hashes, int64_t max_length, std::span<const int32_t> group_ids,
    std::span<std::vector<BlockId>> out) const {
  const int64_t bs = spec_.block_size;
  const int64_t max_num_blocks = max_length / bs;
  const int64_t chunk = spec_.attention_chunk_size;
  const int64_t local_start = max_length > 0 ? max_length / chunk * chunk : 0;
  const int64_t start_block = local_start / bs;
  for (auto& v : out) v.assign(static_cast<size_t>(start_block), kNullBlockId);
  std::vector<BlockId> row(group_ids.size());
  const int64_t end = std::min<int64_t>(max_num_blocks, static_cast<int64_t>(block_hashes.size()));
  for (int64_t i = start_block; i < end; ++i) {
    if (!get_cached_block(block_hashes[static_cast<size_t>(i)], group_ids, row)) break;
    for (size_t g = 0; g < out.size(); ++g) out[g].push_back(row[g]);
  }
  return static_cast<int64_t>(out.empty() ? 0 : out[0].size()) * bs;
}

int64_t max_admission_blocks_per_request(const KVCacheSpec& spec, int64_t max_in_flight_tokens,
                                         int64_t max_model_len) {
  switch (spec.kind) {
    case KVCacheSpecKind::kFullAttention:
      return -1;
    case KVCacheSpecKind::kSlidingWindow:
      // The last W - 1 computed tokens plus the tokens in flight; +1 because the window need
      // not start at a block boundary.
      return cdiv(std::min(spec.sliding_window - 1 + max_in_flight_tokens, max_model_len),
                  spec.block_size) +
             1;
    case KVCacheSpecKind::kChunkedLocalAttention:
      return cdiv(std::min(spec.attention_chunk_size + max_in_flight_tokens, max_model_len),
                  spec.block_size);
  }
  return -1;
}

std::unique_ptr<SingleTypeKVCacheManager> make_single_type_kv_cache_manager(
    const KVCacheSpec& spec, BlockPool& block_pool, bool enable_caching, int32_t kv_cache_group_id,
    int64_t max_in_flight_tokens, int64_t max_model_len, int32_t prefix_cache_retention_interval) {
  const int64_t cap = max_admission_blocks_per_request(spec, max_in_flight_tokens, max_model_len);
  switch (spec.kind) {
    case KVCacheSpecKind::kFullAttention:
      return std::make_unique<FullAttentionManager>(spec, block_pool, enable_caching,
                                                    kv_cache_group_id, cap);
    case KVCacheSpecKind::kSlidingWindow:
      return std::make_unique<SlidingWindowManager>(spec, block_pool, enable_caching,
                                                    kv_cache_group_id, cap,
                                                    prefix_cache_retention_interval);
    case KVCacheSpecKind::kChunkedLocalAttention:
      return std::make_unique<ChunkedLocalAttentionManager>(spec, block_pool, enable_caching,
                                                            kv_cache_group_id, cap);
  }
  throw std::invalid_argument("unknown KV cache spec kind");
}

}  // namespace kvsim
