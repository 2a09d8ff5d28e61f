// KVCacheManager for the coordinated layouts (hybrid groups, or one window group): vLLM 0.26's
// KVCacheManager.get_computed_blocks / allocate_slots over a KVCacheCoordinator. The single
// full-attention path lives in kv_cache_manager.cpp.
#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>

#include "kvsim/core/kv_cache_manager.h"

namespace kvsim {

void KVCacheManager::get_computed_blocks_coordinated(const Request& request, ComputedBlocks& out) {
  out.group_blocks.resize(coordinator_->num_groups());
  for (auto& g : out.group_blocks) g.clear();
  if (request.hash_block_size == 0 || request.num_tokens() <= 0) {
    if (!config_.prefix_cache_stats_at_admission) record_lookup(request, 0);
    return;
  }
  // At least one token is always recomputed (vLLM: max_cache_hit_length = num_tokens - 1).
  int64_t num_uncached = 0;
  const int64_t hit = coordinator_->find_longest_cache_hit(
      request.block_hashes, int64_t{request.num_tokens()} - 1, out.group_blocks, &num_uncached);
  out.num_computed_tokens = static_cast<int32_t>(hit);
  // vLLM get_computed_blocks: the junction is the longest single-group hit, pinned only when
  // some group hit further than the reconciled hit.
  out.shared_prefix_boundary = num_uncached != 0 ? static_cast<int32_t>(hit + num_uncached) : 0;
  if (!config_.prefix_cache_stats_at_admission) record_lookup(request, out.num_computed_tokens);
}

std::optional<std::span<const BlockId>> KVCacheManager::allocate_slots_coordinated(
    Request& request, const AllocateSlotsArgs& args) {
  RequestBlocks& st = state_for(request.request_id);
  const int64_t rid = request.request_id;
  const int64_t L = config_.max_model_len;
  const int64_t local =
      static_cast<int64_t>(request.num_computed_tokens) + args.num_new_computed_tokens;
  const int64_t total = std::min(local, L);
  const bool pays_watermark =
      args.has_scheduled_reqs &&
      (request.status == RequestStatus::WAITING || request.status == RequestStatus::PREEMPTED);
  const int64_t wm = pays_watermark ? watermark_blocks_ : 0;
  const std::span<const std::vector<BlockId>> hits = args.new_computed_group_blocks;

  if (args.full_sequence_must_fit) {
    // The admission gate caps each window group at its per-request reservation.
    const int64_t need_full = coordinator_->get_num_blocks_to_allocate(
        rid, std::min<int64_t>(request.num_tokens(), L), hits, total, true);
    if (need_full + wm > block_pool_.get_num_free_blocks()) return std::nullopt;
  }
  const int64_t main_tokens = total + args.num_new_tokens;
  const int64_t need_slots = std::min(main_tokens + args.num_lookahead_tokens, L);
  // Free what fell out of the windows before counting (vLLM does this even when the allocation
  // then fails): only tokens already processed, since batches in flight still read theirs.
  coordinator_->remove_skipped_blocks(rid,
                                      std::max<int64_t>(0, total - request.num_in_flight_tokens));
  const int64_t k = coordinator_->get_num_blocks_to_allocate(rid, need_slots, hits, local, false);
  if (k + wm > block_pool_.get_num_free_blocks()) return std::nullopt;

  if (!st.live) {
    st.live = true;
    ++num_live_requests_;
  }
  const bool any_hits = std::any_of(hits.begin(), hits.end(),
                                    [](const std::vector<BlockId>& g) { return !g.empty(); });
  if (any_hits) coordinator_->allocate_new_computed_blocks(rid, hits, local);
  coordinator_->allocate_new_blocks(rid, need_slots, new_blocks_, new_block_group_ends_);
  const int64_t held = std::min(main_tokens, L);
  if (held > st.held_tokens) {
    total_held_tokens_ += held - st.held_tokens;
    st.held_tokens = static_cast<int32_t>(held);
  }
  if (config_.enable_caching) {
    coordinator_->cache_blocks(request, std::min<int64_t>(main_tokens, request.num_tokens()));
  }
  return std::span<const BlockId>(new_blocks_);
}

std::span<const BlockId> KVCacheManager::get_block_ids(int64_t request_id, size_t group) const {
  if (!coordinator_) {
    if (group != 0) throw std::out_of_range(fmt::format("KV cache group {} of 1", group));
    return get_block_ids(request_id);
  }
  if (group >= coordinator_->num_groups()) {
    throw std::out_of_range(
        fmt::format("KV cache group {} of {}", group, coordinator_->num_groups()));
  }
  return coordinator_->manager(group).get_blocks(request_id);
}

int64_t KVCacheManager::num_blocks_held(int64_t request_id) const {
  if (!coordinator_) return static_cast<int64_t>(get_block_ids(request_id).size());
  int64_t n = 0;
  for (size_t g = 0; g < coordinator_->num_groups(); ++g) {
    for (BlockId b : coordinator_->manager(g).get_blocks(request_id)) n += b != kNullBlockId;
  }
  return n;
}

int64_t KVCacheManager::max_blocks_for_sequence(int64_t num_tokens) const {
  const int64_t blocks =
      cdiv(std::min<int64_t>(num_tokens, config_.max_model_len), config_.block_size);
  if (!coordinator_) return blocks;
  int64_t n = 0;
  for (size_t g = 0; g < coordinator_->num_groups(); ++g) {
    const int64_t cap = coordinator_->manager(g).max_admission_blocks_per_request();
    n += cap >= 0 ? std::min(blocks, cap) : blocks;
  }
  return n;
}

int64_t KVCacheManager::coordinated_padding_tokens() const {
  int64_t p = 0;
  for (size_t g = 0; g < coordinator_->num_groups(); ++g) p += padding_tokens(g);
  return p;
}

int64_t KVCacheManager::padding_tokens(size_t group) const {
  if (!coordinator_) return padding_tokens();
  return coordinator_->manager(group).num_table_blocks() * config_.block_size - total_held_tokens_;
}

int64_t KVCacheManager::num_held_blocks_in_group(size_t group) const {
  if (!coordinator_) return total_table_blocks_;
  return coordinator_->manager(group).num_held_blocks();
}

int64_t KVCacheManager::num_skipped_blocks_freed() const {
  if (!coordinator_) return 0;
  int64_t n = 0;
  for (size_t g = 0; g < coordinator_->num_groups(); ++g) {
    n += coordinator_->manager(g).num_skipped_blocks_freed();
  }
  return n;
}

void KVCacheManager::check_invariants_coordinated() const {
  coordinator_->check_invariants();
  int64_t held = 0;
  int64_t live = 0;
  for (size_t r = 0; r < req_to_blocks_.size(); ++r) {
    const RequestBlocks& st = req_to_blocks_[r];
    const auto rid = static_cast<int64_t>(r);
    if (!st.live) {
      for (size_t g = 0; g < coordinator_->num_groups(); ++g) {
        if (!coordinator_->manager(g).get_blocks(rid).empty()) {
          throw std::logic_error(fmt::format("M2: dead request {} holds blocks in group {}", r, g));
        }
      }
      continue;
    }
    ++live;
    held += st.held_tokens;
    // Every group allocates to the same slot count, and hits have one length across groups.
    const size_t len0 = coordinator_->manager(0).get_blocks(rid).size();
    for (size_t g = 1; g < coordinator_->num_groups(); ++g) {
      if (coordinator_->manager(g).get_blocks(rid).size() != len0) {
        throw std::logic_error(fmt::format("G1: request {} has {} blocks in group 0, {} in {}", r,
                                           len0, coordinator_->manager(g).get_blocks(rid).size(),
                                           g));
      }
    }
    if (st.held_tokens > static_cast<int64_t>(len0) * config_.block_size) {
      throw std::logic_error(
          fmt::format("M5: request {} holds {} tokens in {} blocks", r, st.held_tokens, len0));
    }
  }
  if (held != total_held_tokens_ || live != num_live_requests_) {
    throw std::logic_error(fmt::format("M5: counters held {}/{} live {}/{}", total_held_tokens_,
                                       held, num_live_requests_, live));
  }
  for (size_t g = 0; g < coordinator_->num_groups(); ++g) {
    if (padding_tokens(g) < 0) {
      throw std::logic_error(fmt::format("M5: group {} padding {} < 0", g, padding_tokens(g)));
    }
  }
}

}  // namespace kvsim
