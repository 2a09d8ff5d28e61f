// Routers of the cluster replay: which replica a request goes to (cluster_replay.h lists the
// policies). A router decides once per request, at its arrival, from a view of every replica
// (possibly stale: replica_snapshot.h) and, for the prefix-aware policies, the request's block
// hashes and a read-only probe of each replica's prefix cache.
//
// Determinism: a router's decisions depend only on its ClusterConfig (seed included) and the
// sequence of route() calls; random choices come from SplitMix64 (router_rng.h), whose output
// is the same on every platform (std:: distributions are not).
// Ties: always the lowest replica index, after the tie-breakers each policy names.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "kvsim/core/request.h"
#include "kvsim/sim/cluster/cluster_replay.h"

namespace kvsim {

// What a router knows about one replica.
struct ReplicaView {
  int64_t outstanding = 0;      // routed there, not finished or rejected yet
  int64_t queued_requests = 0;  // routed there, not scheduled for the first time yet
  int64_t queued_tokens = 0;    // their prompt tokens
  double kv_usage = 0;          // used blocks / usable blocks (vLLM's kv_cache_usage)
};

// Read-only access to the replicas' prefix caches: prompt tokens of `r` that `replica` holds
// cached now (changes no state or counter). Current, never stale: prefix-aware routers in
// production track caches from KV events the engines push (llm-d), not from scrapes.
class PrefixProbe {
 public:
  virtual ~PrefixProbe() = default;
  virtual int32_t cached_prefix_tokens(int32_t replica, const Request& r) const = 0;
};

class Router {
 public:
  virtual ~Router() = default;
  // The replica (in [0, views.size())) for request `r`. `r` carries its block hashes (of the
  // scheduler's block size) when needs_block_hashes() is true.
  virtual int32_t route(const Request& r, std::span<const ReplicaView> views,
                        const PrefixProbe& probe) = 0;
  virtual bool needs_block_hashes() const { return false; }
};

// The router of cluster.router, configured by the ClusterConfig's knobs (validated by the
// caller: run_cluster_replay's checks).
std::unique_ptr<Router> make_router(const ClusterConfig& cluster);

}  // namespace kvsim
