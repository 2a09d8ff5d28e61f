// The prefix-aware routers: prefix-affinity (consistent hashing with bounded load) and kv-aware
// (longest cached prefix against load).
#include <algorithm>
#include <cmath>

#include "router_policies.h"

namespace kvsim::detail {

PrefixAffinityRouter::PrefixAffinityRouter(int32_t replicas, uint64_t seed, int32_t prefix_blocks,
                                           double load_factor)
    : ring_(replicas, kRingPointsPerReplica, seed),
      prefix_blocks_(prefix_blocks),
      load_factor_(load_factor) {}

int32_t PrefixAffinityRouter::route(const Request& r, std::span<const ReplicaView> views,
                                    const PrefixProbe&) {
  // Full prompt blocks only: a generated token never belongs to a routing key.
  const auto full_blocks =
      static_cast<size_t>(r.hash_block_size > 0 ? r.num_prompt_tokens / r.hash_block_size : 0);
  const size_t k =
      std::min({static_cast<size_t>(prefix_blocks_), full_blocks, r.block_hashes.size()});
  uint64_t key = 0;
  if (k > 0) {
    const BlockHash& h = r.block_hashes[k - 1];  // chained: covers blocks 0..k-1
    key = splitmix64_mix(h.lo ^ splitmix64_mix(h.hi));
  } else {
    key = splitmix64_mix(r.content.salt);
  }
  int64_t total = 0;
  for (const ReplicaView& v : views) total += v.outstanding;
  const double cap =
      std::ceil(load_factor_ * static_cast<double>(total + 1) / static_cast<double>(views.size()));
  const int32_t chosen = ring_.first_accepting(key, [&](int32_t i) {
    return static_cast<double>(views[static_cast<size_t>(i)].outstanding + 1) <= cap;
  });
  // Some replica is always at or below the mean, so -1 cannot happen; stay total anyway.
  return chosen >= 0 ? chosen : least_outstanding(views);
}

int32_t KvAwareRouter::route(const Request& r, std::span<const ReplicaView> views,
                             const PrefixProbe& probe) {
  int64_t max_outstanding = 0;
  for (const ReplicaView& v : views) max_outstanding = std::max(max_outstanding, v.outstanding);
  const double tokens = std::max(1, r.num_tokens());
  int32_t best = 0;
  double best_score = 0;
  for (size_t i = 0; i < views.size(); ++i) {
    const auto replica = static_cast<int32_t>(i);
    const double cached = probe.cached_prefix_tokens(replica, r) / tokens;
    const double load = max_outstanding > 0 ? static_cast<double>(views[i].outstanding) /
                                                  static_cast<double>(max_outstanding)
                                            : 0.0;
    const double score = cached - load_weight_ * load;
    if (i == 0 || score > best_score) {
      best = replica;
      best_score = score;
    }
  }
  return best;
}

}  // namespace kvsim::detail
