// Internal: the router policies (router.h). Load-based ones in router_load.cpp, prefix-aware ones
// in router_prefix.cpp.
#pragma once

#include <cstdint>
#include <memory>

#include "kvsim/sim/cluster/hash_ring.h"
#include "kvsim/sim/cluster/router.h"
#include "kvsim/sim/cluster/router_rng.h"

namespace kvsim::detail {

// Replica i for the i-th request, modulo N.
class RoundRobinRouter final : public Router {
 public:
  int32_t route(const Request& r, std::span<const ReplicaView> views,
                const PrefixProbe& probe) override;

 private:
  uint64_t next_ = 0;
};

class RandomRouter final : public Router {
 public:
  explicit RandomRouter(uint64_t seed) : rng_(seed) {}
  int32_t route(const Request& r, std::span<const ReplicaView> views,
                const PrefixProbe& probe) override;

 private:
  SplitMix64 rng_;
};

// Fewest outstanding requests.
class LeastOutstandingRouter final : public Router {
 public:
  int32_t route(const Request& r, std::span<const ReplicaView> views,
                const PrefixProbe& probe) override;
};

// Lowest KV usage, then fewest outstanding (at equal usage, e.g. a burst before any replica
// stepped, the request count still spreads the load).
class LeastKvRouter final : public Router {
 public:
  int32_t route(const Request& r, std::span<const ReplicaView> views,
                const PrefixProbe& probe) override;
};

// Two distinct uniformly drawn replicas; the one with fewer outstanding requests (Mitzenmacher's
// power of two choices), the lower index at a tie.
class PowerOfTwoRouter final : public Router {
 public:
  explicit PowerOfTwoRouter(uint64_t seed) : rng_(seed) {}
  int32_t route(const Request& r, std::span<const ReplicaView> views,
                const PrefixProbe& probe) override;

 private:
  SplitMix64 rng_;
};

// Ring points per replica: enough that each replica's share of the key space is within ~10% of
// 1/N (the spread of a ring falls as 1/sqrt(points)).
inline constexpr int32_t kRingPointsPerReplica = 160;

// Consistent hashing of the chained hash of the first `prefix_blocks` full prompt blocks (the
// whole prefix up to there, so requests sharing it share a key); bounded load: a replica accepts
// while outstanding + 1 <= ceil(load_factor * (Σ outstanding + 1) / N), else the key walks on
// clockwise. A prompt shorter than one block hashes its request-unique salt.
class PrefixAffinityRouter final : public Router {
 public:
  PrefixAffinityRouter(int32_t replicas, uint64_t seed, int32_t prefix_blocks, double load_factor);
  int32_t route(const Request& r, std::span<const ReplicaView> views,
                const PrefixProbe& probe) override;
  bool needs_block_hashes() const override { return true; }

 private:
  HashRing ring_;
  int32_t prefix_blocks_;
  double load_factor_;
};

// score(i) = cached_prefix_tokens(i) / prompt_tokens - load_weight * outstanding(i) / max
// outstanding (0 when no replica has any); the highest score wins.
class KvAwareRouter final : public Router {
 public:
  explicit KvAwareRouter(double load_weight) : load_weight_(load_weight) {}
  int32_t route(const Request& r, std::span<const ReplicaView> views,
                const PrefixProbe& probe) override;
  bool needs_block_hashes() const override { return true; }

 private:
  double load_weight_;
};

// The least-outstanding choice (shared by several policies).
int32_t least_outstanding(std::span<const ReplicaView> views);

}  // namespace kvsim::detail
