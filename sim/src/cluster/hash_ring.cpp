#include "kvsim/sim/cluster/hash_ring.h"

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "kvsim/sim/cluster/router_rng.h"

namespace kvsim {

HashRing::HashRing(int32_t replicas, int32_t vnodes, uint64_t seed) : replicas_(replicas) {
  if (replicas < 1 || vnodes < 1) {
    throw std::invalid_argument(fmt::format(
        "hash ring: needs >= 1 replica and >= 1 point each (got {}, {})", replicas, vnodes));
  }
  points_.reserve(static_cast<size_t>(replicas) * static_cast<size_t>(vnodes));
  for (int32_t r = 0; r < replicas; ++r) {
    for (int32_t v = 0; v < vnodes; ++v) {
      const uint64_t pos = splitmix64_mix(splitmix64_mix(seed ^ splitmix64_mix(uint64_t(r))) +
                                          static_cast<uint64_t>(v));
      points_.push_back({pos, r});
    }
  }
  std::sort(points_.begin(), points_.end(), [](const Point& a, const Point& b) {
    return std::tie(a.position, a.replica) < std::tie(b.position, b.replica);
  });
}

size_t HashRing::first_point(uint64_t key) const {
  const auto it = std::lower_bound(points_.begin(), points_.end(), key,
                                   [](const Point& p, uint64_t k) { return p.position < k; });
  return it == points_.end() ? 0 : static_cast<size_t>(it - points_.begin());
}

int32_t HashRing::owner(uint64_t key) const {
  return points_[first_point(key)].replica;
}

int32_t HashRing::first_accepting(uint64_t key, const std::function<bool(int32_t)>& accept) const {
  const size_t start = first_point(key);
  std::vector<bool> tried(static_cast<size_t>(replicas_), false);
  int32_t left = replicas_;
  for (size_t k = 0; k < points_.size() && left > 0; ++k) {
    const int32_t r = points_[(start + k) % points_.size()].replica;
    if (tried[static_cast<size_t>(r)]) continue;
    tried[static_cast<size_t>(r)] = true;
    --left;
    if (accept(r)) return r;
  }
  return -1;
}

}  // namespace kvsim
