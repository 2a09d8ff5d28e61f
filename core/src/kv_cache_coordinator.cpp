#include "kvsim/core/kv_cache_coordinator.h"

#include <fmt/core.h>

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "kvsim/core/param.h"

namespace kvsim {

void validate_prefix_cache_retention_interval(int32_t retention_interval, int32_t block_size,
                                              const KVCacheConfig& config) {
  if (retention_interval == -1) return;  // None: dense
  const bool has_window_group = std::any_of(
      config.kv_cache_groups.begin(), config.kv_cache_groups.end(), [](const KVCacheGroupSpec& g) {
        return g.kv_cache_spec.kind == KVCacheSpecKind::kSlidingWindow;
      });
  if (!has_window_group) {
    if (retention_interval == 0) return;
    throw std::invalid_argument(
        fmt::format("{} is {} but this model has no sliding-window KV cache group, so retention "
                    "has no effect; set it to 0 (or None: dense)",
                    param("prefix_cache_retention_interval"), retention_interval));
  }
  if (retention_interval < 0 || block_size <= 0 || retention_interval % block_size != 0) {
    throw std::invalid_argument(
        fmt::format("{} ({}) must be None, 0 or a positive multiple of the block size ({})",
                    param("prefix_cache_retention_interval"), retention_interval, block_size));
  }
}

KVCacheCoordinator::KVCacheCoordinator(const KVCacheConfig& config, BlockPool& block_pool,
                                       bool enable_caching, int64_t max_model_len,
                                       int64_t max_in_flight_tokens,
                                       int32_t prefix_cache_retention_interval)
    : block_pool_(block_pool),
      enable_caching_(enable_caching),
      retention_interval_(prefix_cache_retention_interval) {
  validate_kv_cache_config(config);
  validate_prefix_cache_retention_interval(prefix_cache_retention_interval, config.block_size(),
                                           config);
  if (config.num_blocks != block_pool.num_gpu_blocks()) {
    throw std::invalid_argument(fmt::format("KVCacheCoordinator: config has {} blocks, pool {}",
                                            config.num_blocks, block_pool.num_gpu_blocks()));
  }
  for (size_t g = 0; g < config.kv_cache_groups.size(); ++g) {
    const KVCacheSpec& spec = config.kv_cache_groups[g].kv_cache_spec;
    managers_.push_back(make_single_type_kv_cache_manager(
        spec, block_pool, enable_caching, static_cast<int32_t>(g), max_in_flight_tokens,
        max_model_len, prefix_cache_retention_interval));
    auto it = std::find_if(attention_groups_.begin(), attention_groups_.end(),
                           [&](const SpecGroup& s) { return s.spec == spec; });
    if (it == attention_groups_.end()) {
      attention_groups_.push_back(SpecGroup{spec, {static_cast<int32_t>(g)}});
    } else {
      it->group_ids.push_back(static_cast<int32_t>(g));
    }
  }
  // Full attention first: its left-to-right scan bounds the others (vLLM sorts stably).
  std::stable_sort(attention_groups_.begin(), attention_groups_.end(),
                   [](const SpecGroup& a, const SpecGroup& b) {
                     const bool fa = a.spec.kind == KVCacheSpecKind::kFullAttention;
                     const bool fb = b.spec.kind == KVCacheSpecKind::kFullAttention;
                     return fa && !fb;
                   });
  is_simple_hybrid_ = attention_groups_.size() == 2 &&
                      attention_groups_[0].spec.kind == KVCacheSpecKind::kFullAttention;
}

int64_t KVCacheCoordinator::get_num_blocks_to_allocate(
    int64_t request_id, int64_t num_tokens,
    std::span<const std::vector<BlockId>> new_computed_blocks, int64_t total_computed_tokens,
    bool apply_admission_cap) const {
  int64_t n = 0;
  for (size_t g = 0; g < managers_.size(); ++g) {
    const std::span<const BlockId> hits = g < new_computed_blocks.size()
                                              ? std::span<const BlockId>(new_computed_blocks[g])
                                              : std::span<const BlockId>();
    n += managers_[g]->get_num_blocks_to_allocate(request_id, num_tokens, hits,
                                                  total_computed_tokens, apply_admission_cap);
  }
  return n;
}

void KVCacheCoordinator::allocate_new_computed_blocks(
    int64_t request_id, std::span<const std::vector<BlockId>> new_computed_blocks,
    int64_t num_local_computed_tokens) {
  for (const auto& m : managers_) {
    if (m->has_num_cached_block(request_id)) return;
  }
  // All groups' hits are touched before any group allocates (vLLM issue #33775's two phases).
  for (size_t g = 0; g < managers_.size(); ++g) {
    const std::span<const BlockId> hits = g < new_computed_blocks.size()
                                              ? std::span<const BlockId>(new_computed_blocks[g])
                                              : std::span<const BlockId>();
    managers_[g]->add_local_computed_blocks(request_id, hits, num_local_computed_tokens);
  }
}

void KVCacheCoordinator::allocate_new_blocks(int64_t request_id, int64_t num_tokens,
                                             std::vector<BlockId>& out,
                                             std::vector<int32_t>& group_ends) {
  out.clear();
  group_ends.clear();
  for (const auto& m : managers_) {
    m->allocate_new_blocks(request_id, num_tokens, out);
    group_ends.push_back(static_cast<int32_t>(out.size()));
  }
}

void KVCacheCoordinator::cache_blocks(const Request& request, int64_t num_computed_tokens) {
  if (!enable_caching_) return;
  for (const auto& m : managers_) m->cache_blocks(request, num_computed_tokens);
}

void KVCacheCoordinator::free(int64_t request_id) {
  for (const auto& m : managers_) m->free(request_id);
}

void KVCacheCoordinator::remove_skipped_blocks(int64_t request_id,
                                               int64_t processed_computed_tokens) {
  for (const auto& m : managers_) m->remove_skipped_blocks(request_id, processed_computed_tokens);
}

int64_t KVCacheCoordinator::find_longest_cache_hit(std::span<const BlockHash> block_hashes,
                                                   int64_t max_cache_hit_length,
                                                   std::vector<std::vector<BlockId>>& out,
                                                   int64_t* num_uncached) const {
  const size_t num_groups = managers_.size();
  out.resize(num_groups);
  for (auto& v : out) v.clear();
  if (num_uncached != nullptr) *num_uncached = 0;
  if (!enable_caching_) return 0;
  int64_t longest_hit_length = 0;
  std::vector<bool> found(num_groups, false);
  std::vector<int64_t> hit_length_by_group(num_groups, 0);
  std::vector<std::vector<BlockId>> scratch;
  int64_t hit_length = max_cache_hit_length;
  while (true) {
    int64_t curr = hit_length;
    for (const SpecGroup& sg : attention_groups_) {
      const auto first = static_cast<size_t>(sg.group_ids[0]);
      if (sg.spec.kind == KVCacheSpecKind::kFullAttention && found[first]) {
        // Full attention is downward-closed: trim later instead of looking up again.
        curr = std::min(curr, hit_length_by_group[first]);
        continue;
      }
      scratch.resize(sg.group_ids.size());
      const int64_t len =
          managers_[first]->find_longest_cache_hit(block_hashes, curr, sg.group_ids, scratch);
      curr = len;
      for (size_t i = 0; i < sg.group_ids.size(); ++i) {
        const auto g = static_cast<size_t>(sg.group_ids[i]);
        out[g].swap(scratch[i]);
        found[g] = true;
        hit_length_by_group[g] = len;
      }
      longest_hit_length = std::max(longest_hit_length, len);
    }
    if (curr >= hit_length) break;
    hit_length = curr;
    if (is_simple_hybrid_) break;
  }
  const SpecGroup& head = attention_groups_.front();
  if (head.spec.kind == KVCacheSpecKind::kFullAttention) {
    const auto keep = static_cast<size_t>(cdiv(hit_length, head.spec.block_size));
    for (int32_t g : head.group_ids) {
      auto& v = out[static_cast<size_t>(g)];
      if (v.size() > keep) v.resize(keep);
    }
  }
  // vLLM's UnitaryKVCacheCoordinator reports 0: no other group can lag a single one.
  if (num_uncached != nullptr && num_groups > 1) *num_uncached = longest_hit_length - hit_length;
  return hit_length;
}

void KVCacheCoordinator::check_invariants() const {
  block_pool_.check_invariants();
  std::vector<int32_t> refs(static_cast<size_t>(block_pool_.num_gpu_blocks()), 0);
  for (const auto& m : managers_) m->check_invariants(refs);
  for (BlockId b = 1; b < block_pool_.num_gpu_blocks(); ++b) {
    if (block_pool_.ref_cnt(b) != refs[static_cast<size_t>(b)]) {
      throw std::logic_error(fmt::format("C2: block {} has ref_cnt {} but {} tables list it", b,
                                         block_pool_.ref_cnt(b), refs[static_cast<size_t>(b)]));
    }
  }
}

}  // namespace kvsim
