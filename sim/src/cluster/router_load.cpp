// The load-based routers: round-robin, random, least-outstanding, least-kv, power-of-two.
#include "router_policies.h"

namespace kvsim::detail {

int32_t least_outstanding(std::span<const ReplicaView> views) {
  size_t best = 0;
  for (size_t i = 1; i < views.size(); ++i) {
    if (views[i].outstanding < views[best].outstanding) best = i;
  }
  return static_cast<int32_t>(best);
}

int32_t RoundRobinRouter::route(const Request&, std::span<const ReplicaView> views,
                                const PrefixProbe&) {
  return static_cast<int32_t>(next_++ % views.size());
}

int32_t RandomRouter::route(const Request&, std::span<const ReplicaView> views,
                            const PrefixProbe&) {
  return static_cast<int32_t>(rng_.uniform(views.size()));
}

int32_t LeastOutstandingRouter::route(const Request&, std::span<const ReplicaView> views,
                                      const PrefixProbe&) {
  return least_outstanding(views);
}

int32_t LeastKvRouter::route(const Request&, std::span<const ReplicaView> views,
                             const PrefixProbe&) {
  size_t best = 0;
  for (size_t i = 1; i < views.size(); ++i) {
    const ReplicaView& a = views[i];
    const ReplicaView& b = views[best];
    if (a.kv_usage < b.kv_usage || (a.kv_usage == b.kv_usage && a.outstanding < b.outstanding)) {
      best = i;
    }
  }
  return static_cast<int32_t>(best);
}

int32_t PowerOfTwoRouter::route(const Request&, std::span<const ReplicaView> views,
                                const PrefixProbe&) {
  const uint64_t n = views.size();
  if (n == 1) return 0;
  const uint64_t a = rng_.uniform(n);
  uint64_t b = rng_.uniform(n - 1);
  if (b >= a) ++b;  // distinct from a, uniform over the others
  const uint64_t lo = a < b ? a : b;
  const uint64_t hi = a < b ? b : a;
  return static_cast<int32_t>(views[hi].outstanding < views[lo].outstanding ? hi : lo);
}

}  // namespace kvsim::detail
