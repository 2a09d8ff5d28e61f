// Consistent-hash ring for prefix-affinity routing (Karger et al. 1997), with bounded loads
// (Mirrokni, Thorup, Zadimoghaddam 2018: a key walks clockwise past replicas that are full).
//
// Each replica owns `vnodes` points at positions splitmix64(seed, replica, vnode); a key maps to
// the first point at or after it (wrapping). Invariants: points are sorted by (position,
// replica, vnode); every replica owns exactly `vnodes` points; adding a replica moves only keys
// that land on its new points.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace kvsim {

class HashRing {
 public:
  // Throws std::invalid_argument for replicas < 1 or vnodes < 1.
  HashRing(int32_t replicas, int32_t vnodes, uint64_t seed);

  // The replica owning `key` (the first point clockwise from it).
  int32_t owner(uint64_t key) const;
  // The first replica clockwise from `key` (each replica considered once) for which
  // `accept(replica)` is true; -1 when none accepts.
  int32_t first_accepting(uint64_t key, const std::function<bool(int32_t)>& accept) const;

  int32_t num_replicas() const { return replicas_; }

 private:
  struct Point {
    uint64_t position;
    int32_t replica;
  };
  size_t first_point(uint64_t key) const;

  int32_t replicas_;
  std::vector<Point> points_;
};

}  // namespace kvsim
