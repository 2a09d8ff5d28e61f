#include "kvsim/core/kv_cache_manager.h"

#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace kvsim {

KVCacheManager::KVCacheManager(const KVCacheManagerConfig& config)
    : config_(config), block_pool_(config.num_gpu_blocks, config.enable_caching) {
  if (config.block_size <= 0) {
    throw std::invalid_argument(
        fmt::format("KVCacheManager: block_size must be > 0, got {}", config.block_size));
  }
  if (config.max_model_len <= 0) {
    throw std::invalid_argument(
        fmt::format("KVCacheManager: max_model_len must be > 0, got {}", config.max_model_len));
  }
  if (!(config.watermark >= 0.0 && config.watermark < 1.0)) {
    throw std::invalid_argument(
        fmt::format("KVCacheManager: watermark must be in [0, 1), got {}", config.watermark));
  }
  watermark_blocks_ = static_cast<int32_t>(config.watermark * config.num_gpu_blocks);
  const KVCacheConfig& kv = config.kv_cache_config;
  // The single full-attention path has no coordinator to validate it (no window group: only
  // None or 0, which changes nothing there).
  validate_prefix_cache_retention_interval(config.prefix_cache_retention_interval,
                                           config.block_size, kv);
  if (kv.kv_cache_groups.empty()) return;
  validate_kv_cache_config(kv);
  if (kv.num_blocks != config.num_gpu_blocks || kv.block_size() != config.block_size) {
    throw std::invalid_argument(fmt::format(
        "KVCacheManager: kv_cache_config has {} blocks of {} tokens, the manager {} of {}",
        kv.num_blocks, kv.block_size(), config.num_gpu_blocks, config.block_size));
  }
  const bool single_full =
      kv.kv_cache_groups.size() == 1 &&
      kv.kv_cache_groups[0].kv_cache_spec.kind == KVCacheSpecKind::kFullAttention;
  if (single_full) return;
  const int64_t in_flight =
      config.max_in_flight_tokens > 0 ? config.max_in_flight_tokens : config.max_model_len;
  coordinator_ = std::make_unique<KVCacheCoordinator>(kv, block_pool_, config.enable_caching,
                                                      config.max_model_len, in_flight,
                                                      config.prefix_cache_retention_interval);
}

KVCacheManager::RequestBlocks& KVCacheManager::state_for(int64_t request_id) {
  if (request_id < 0)
    throw std::invalid_argument(fmt::format("KVCacheManager: negative request id {}", request_id));
  if (static_cast<size_t>(request_id) >= req_to_blocks_.size()) {
    req_to_blocks_.resize(std::max(static_cast<size_t>(request_id) + 1, req_to_blocks_.size() * 2));
  }
  return req_to_blocks_[static_cast<size_t>(request_id)];
}

ComputedBlocks KVCacheManager::get_computed_blocks(const Request& request) {
  ComputedBlocks out;
  get_computed_blocks(request, out);
  return out;
}

void KVCacheManager::get_computed_blocks(const Request& request, ComputedBlocks& out) {
  out.blocks.clear();
  out.num_computed_tokens = 0;
  out.shared_prefix_boundary = 0;
  // vLLM skips the lookup (and its record) only when caching is off.
  if (!config_.enable_caching) return;
  if (coordinator_) {
    get_computed_blocks_coordinated(request, out);
    return;
  }
  if (request.hash_block_size == 0 || request.num_tokens() <= 0) {
    if (!config_.prefix_cache_stats_at_admission) record_lookup(request, 0);
    return;
  }
  // At least one token is always recomputed (vLLM: max_cache_hit_length = num_tokens - 1).
  const size_t max_blocks =
      std::min(static_cast<size_t>((request.num_tokens() - 1) / config_.block_size),
               request.block_hashes.size());
  for (size_t i = 0; i < max_blocks; ++i) {
    auto hit = block_pool_.get_cached_block(request.block_hashes[i]);
    if (!hit) break;
    out.blocks.push_back(*hit);
  }
  out.num_computed_tokens = static_cast<int32_t>(out.blocks.size()) * config_.block_size;
  if (!config_.prefix_cache_stats_at_admission) record_lookup(request, out.num_computed_tokens);
}

int32_t KVCacheManager::get_num_blocks_to_allocate(const RequestBlocks& st, int64_t num_tokens,
                                                   std::span<const BlockId> hits) const {
  const int64_t required = cdiv(num_tokens, config_.block_size);
  const int64_t r = static_cast<int64_t>(st.blocks.size());
  if (st.num_cached_block >= 0) return static_cast<int32_t>(std::max<int64_t>(required - r, 0));
  int64_t k = std::max<int64_t>(required - (static_cast<int64_t>(hits.size()) + r), 0);
  // Free cached hits are pulled out of the free queue by touch(): they consume free capacity.
  for (BlockId b : hits) {
    if (b != kNullBlockId && block_pool_.is_free(b)) ++k;
  }
  return static_cast<int32_t>(k);
}

std::optional<std::span<const BlockId>> KVCacheManager::allocate_slots_general(
    Request& request, const AllocateSlotsArgs& args) {
  if (args.num_new_tokens <= 0) {
    throw std::invalid_argument(fmt::format("allocate_slots: request {} asks for {} new tokens",
                                            request.request_id, args.num_new_tokens));
  }
  if (coordinator_) return allocate_slots_coordinated(request, args);
  RequestBlocks& st = state_for(request.request_id);
  const int64_t L = config_.max_model_len;
  const int64_t local =
      static_cast<int64_t>(request.num_computed_tokens) + args.num_new_computed_tokens;
  const int64_t total = std::min(local, L);
  const bool pays_watermark =
      args.has_scheduled_reqs &&
      (request.status == RequestStatus::WAITING || request.status == RequestStatus::PREEMPTED);
  const int64_t wm = pays_watermark ? watermark_blocks_ : 0;
  const int64_t free = block_pool_.get_num_free_blocks();
  const int64_t main_tokens = total + args.num_new_tokens;
  const int64_t need_slots = std::min(main_tokens + args.num_lookahead_tokens, L);

  if (args.full_sequence_must_fit) {
    const int64_t need_full = get_num_blocks_to_allocate(
        st, std::min<int64_t>(request.num_tokens(), L), args.new_computed_blocks);
    if (need_full + wm > free) return std::nullopt;
  }
  const int64_t k = get_num_blocks_to_allocate(st, need_slots, args.new_computed_blocks);
  if (k + wm > free) return std::nullopt;

  if (!st.live) {
    st.live = true;
    ++num_live_requests_;
    if (st.blocks.capacity() == 0 && !spare_tables_.empty()) {
      st.blocks = std::move(spare_tables_.back());
      spare_tables_.pop_back();
    }
  }
  if (!args.new_computed_blocks.empty()) {
    if (!st.blocks.empty()) {
      throw std::logic_error(
          fmt::format("allocate_slots: running request {} given prefix hits", request.request_id));
    }
    block_pool_.touch(args.new_computed_blocks);
    st.blocks.assign(args.new_computed_blocks.begin(), args.new_computed_blocks.end());
    st.num_cached_block = static_cast<int32_t>(st.blocks.size());
    total_table_blocks_ += static_cast<int64_t>(st.blocks.size());
  }
  new_blocks_.clear();
  const int64_t m = cdiv(need_slots, config_.block_size) - static_cast<int64_t>(st.blocks.size());
  if (m > 0) {
    block_pool_.get_new_blocks(static_cast<int32_t>(m), new_blocks_);
    st.blocks.insert(st.blocks.end(), new_blocks_.begin(), new_blocks_.end());
    total_table_blocks_ += m;
  }
  const int64_t held = std::min(main_tokens, L);
  if (held > st.held_tokens) {
    total_held_tokens_ += held - st.held_tokens;
    st.held_tokens = static_cast<int32_t>(held);
  }
  if (config_.enable_caching) {
    cache_blocks_held(request, st, std::min<int64_t>(main_tokens, request.num_tokens()));
  }
  return std::span<const BlockId>(new_blocks_);
}

void KVCacheManager::cache_blocks_held(const Request& request, RequestBlocks& st,
                                       int64_t num_tokens) {
  if (coordinator_) {
    coordinator_->cache_blocks(request, num_tokens);
    return;
  }
  if (request.hash_block_size == 0) return;
  if (request.hash_block_size != config_.block_size) {
    throw std::logic_error(
        fmt::format("cache_blocks: request {} hashes {}-token blocks, pool uses {}",
                    request.request_id, request.hash_block_size, config_.block_size));
  }
  const int64_t start = std::max(st.num_cached_block, 0);
  // Most calls complete no block: decide that with a multiplication, not the division below.
  if (num_tokens < (start + 1) * config_.block_size) return;
  // A decode's case (the general code below would cache just that block, without a hash).
  if (cache_one_private_block(request, st, num_tokens)) return;
  const int64_t full = num_tokens / config_.block_size;
  if (request.num_block_hashes() < full || static_cast<int64_t>(st.blocks.size()) < full) {
    throw std::logic_error(
        fmt::format("cache_blocks: request {} has {} hashes and {} blocks, needs {}",
                    request.request_id, request.num_block_hashes(), st.blocks.size(), full));
  }
  // Blocks [start, shared_end) go to the prefix map; [shared_end, full) are private when
  // deferring (see KVCacheManagerConfig::defer_private_block_hashes).
  const int64_t shared_end =
      config_.defer_private_block_hashes
          ? std::clamp<int64_t>(request.first_private_block_hash, start, full)
          : full;
  auto range = [&](int64_t begin, int64_t end) {
    return std::pair(
        std::span<const BlockId>(st.blocks.data() + begin, static_cast<size_t>(end - begin)),
        std::span<const BlockHash>(request.block_hashes.data() + begin,
                                   static_cast<size_t>(end - begin)));
  };
  if (shared_end > start) {
    const auto [blocks, hashes] = range(start, shared_end);
    block_pool_.cache_full_blocks(blocks, hashes);
  }
  if (full > shared_end) {
    // Private hashes the request has not computed (Request::num_deferred_block_hashes) are
    // supplied when the blocks are published.
    const int64_t known =
        std::clamp<int64_t>(static_cast<int64_t>(request.block_hashes.size()), shared_end, full);
    if (known > shared_end) {
      const auto [blocks, hashes] = range(shared_end, known);
      block_pool_.cache_private_blocks(blocks, hashes);
    }
    if (full > known) {
      // Past the cached blocks (known >= start): neither hashed nor null (M4).
      block_pool_.cache_new_private_blocks(
          std::span<const BlockId>(st.blocks.data() + known, static_cast<size_t>(full - known)));
    }
  }
  st.num_cached_block = static_cast<int32_t>(full);
}

void KVCacheManager::free(const Request& request) {
  if (request.request_id < 0 || static_cast<size_t>(request.request_id) >= req_to_blocks_.size())
    return;
  RequestBlocks& st = req_to_blocks_[static_cast<size_t>(request.request_id)];
  if (!st.live) return;
  if (coordinator_) coordinator_->free(request.request_id);
  // A request freed before it finished (preempted) may look its own salted hashes up when it is
  // re-admitted: its private blocks enter the prefix map now, in table order (caching order).
  if (config_.defer_private_block_hashes && !is_finished(request.status)) {
    if (request.num_deferred_block_hashes > 0) {
      throw std::logic_error(fmt::format(
          "KVCacheManager::free: request {} is freed unfinished with {} deferred block hashes "
          "(materialize_block_hashes() first: its private blocks are published now)",
          request.request_id, request.num_deferred_block_hashes));
    }
    block_pool_.publish_private_blocks(st.blocks, request.block_hashes);
  }
  // vLLM frees the table in reverse (tail blocks are evicted first).
  if (config_.enable_caching && !coordinator_ && block_pool_.num_shared_blocks() == 0) {
    // M3 and M4: the cached blocks first, then the others (free_table_blocks frees in reverse).
    block_pool_.free_table_blocks(st.blocks, static_cast<size_t>(std::max(st.num_cached_block, 0)));
  } else {
    // The table is dropped after this, so it is reversed in place rather than copied.
    std::reverse(st.blocks.begin(), st.blocks.end());
    block_pool_.free_held_blocks(st.blocks);  // a table: its blocks in use, each listed once
  }
  total_table_blocks_ -= static_cast<int64_t>(st.blocks.size());
  total_held_tokens_ -= st.held_tokens;
  --num_live_requests_;
  st.blocks.clear();
  spare_tables_.push_back(std::move(st.blocks));
  st.blocks = {};
  st.num_cached_block = -1;
  st.held_tokens = 0;
  st.live = false;
}

void KVCacheManager::record_lookup(const Request& request, int32_t num_hit_tokens) {
  PrefixCacheStats& s = prefix_cache_stats_;
  if (request.num_preemptions > 0) {
    s.preempted_requests += 1;
    s.preempted_queries += request.num_tokens();
    s.preempted_hits += num_hit_tokens;
  } else {
    s.requests += 1;
    s.queries += request.num_tokens();
    s.hits += num_hit_tokens;
  }
}

std::span<const BlockId> KVCacheManager::get_block_ids(int64_t request_id) const {
  if (coordinator_) return coordinator_->manager(0).get_blocks(request_id);
  if (request_id < 0 || static_cast<size_t>(request_id) >= req_to_blocks_.size()) return {};
  return req_to_blocks_[static_cast<size_t>(request_id)].blocks;
}

void KVCacheManager::check_invariants() const {
  if (coordinator_) {
    check_invariants_coordinated();
    return;
  }
  block_pool_.check_invariants();
  std::unordered_map<BlockId, int32_t> refs;
  int64_t blocks = 0;
  int64_t held = 0;
  int64_t live = 0;
  for (size_t r = 0; r < req_to_blocks_.size(); ++r) {
    const RequestBlocks& st = req_to_blocks_[r];
    if (!st.live) {
      if (!st.blocks.empty())
        throw std::logic_error(fmt::format("M2: dead request {} holds blocks", r));
      continue;
    }
    ++live;
    std::unordered_set<BlockId> seen;
    for (BlockId b : st.blocks) {
      if (b == kNullBlockId) continue;
      if (!seen.insert(b).second)
        throw std::logic_error(fmt::format("M3: block {} twice in request {}", b, r));
      ++refs[b];
    }
    if (st.num_cached_block > static_cast<int32_t>(st.blocks.size())) {
      throw std::logic_error(fmt::format("M4: request {} num_cached_block {} > {} blocks", r,
                                         st.num_cached_block, st.blocks.size()));
    }
    if (config_.enable_caching) {
      for (int32_t i = 0; i < static_cast<int32_t>(st.blocks.size()); ++i) {
        const BlockId b = st.blocks[static_cast<size_t>(i)];
        if (b == kNullBlockId) {
          throw std::logic_error(fmt::format("M4: request {} block #{} is the null block", r, i));
        }
        if (block_pool_.is_cached(b) != (i < st.num_cached_block)) {
          throw std::logic_error(fmt::format("M4: request {} block #{} should {}be cached", r, i,
                                             i < st.num_cached_block ? "" : "not "));
        }
      }
    }
    blocks += static_cast<int64_t>(st.blocks.size());
    held += st.held_tokens;
    if (st.held_tokens > static_cast<int64_t>(st.blocks.size()) * config_.block_size) {
      throw std::logic_error(fmt::format("M5: request {} holds {} tokens in {} blocks", r,
                                         st.held_tokens, st.blocks.size()));
    }
  }
  for (BlockId b = 1; b < block_pool_.num_gpu_blocks(); ++b) {
    auto it = refs.find(b);
    const int32_t expect = it == refs.end() ? 0 : it->second;
    if (block_pool_.ref_cnt(b) != expect) {
      throw std::logic_error(fmt::format("M2: block {} has ref_cnt {} but {} live tables list it",
                                         b, block_pool_.ref_cnt(b), expect));
    }
  }
  if (blocks != total_table_blocks_ || held != total_held_tokens_ || live != num_live_requests_ ||
      padding_tokens() < 0) {
    throw std::logic_error(fmt::format("M5: counters blocks {}/{} held {}/{} live {}/{}",
                                       total_table_blocks_, blocks, total_held_tokens_, held,
                                       num_live_requests_, live));
  }
}

}  // namespace kvsim
