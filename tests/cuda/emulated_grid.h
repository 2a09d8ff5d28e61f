// A sequential CPU executor for the CTA bodies of kvsim/cuda/detail/cta.h: it runs every CTA of a
// grid and every thread of each CTA with the same blockIdx/threadIdx arithmetic as the GPU, so the
// GPU-only paths (per-CTA thread loops, chunking, the entry->sequence search, block reductions
// and scans, atomics) run in CI without a GPU.
//
// Sequential execution is a valid schedule of the kernels: within a phase (between two syncs) the
// threads of a CTA touch disjoint outputs or combine through atomics, and CTAs are independent.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kvsim/cuda/detail/cta.h"

namespace kvsim::test {

struct EmulatedCta {
  int32_t num_threads = 1;

  template <class F>
  void threads(F&& f) const {
    for (int32_t tx = 0; tx < num_threads; ++tx) f(tx);
  }
  void sync() const {}
  template <class F>
  unsigned long long sum(F&& f) const {
    unsigned long long s = 0;
    for (int32_t tx = 0; tx < num_threads; ++tx) s += static_cast<unsigned long long>(f(tx));
    return s;
  }
  template <class V, class F, class Op, class G>
  V exclusive_scan(F&& value, Op op, G&& use) const {
    std::vector<V> values(static_cast<size_t>(num_threads));
    for (int32_t tx = 0; tx < num_threads; ++tx) values[static_cast<size_t>(tx)] = value(tx);
    V prefix{0};
    for (int32_t tx = 0; tx < num_threads; ++tx) {
      use(tx, prefix);
      prefix = op(prefix, values[static_cast<size_t>(tx)]);
    }
    return prefix;
  }
  void atomic_add(unsigned long long* p, unsigned long long v) const { *p += v; }
  void atomic_min(long long* p, long long v) const {
    if (v < *p) *p = v;
  }
};

// Runs body(cta, at) for every CTA of `shape`, x fastest (the order does not matter).
inline void run_grid(const cta::LaunchShape& shape,
                     const std::function<void(EmulatedCta&, const cta::CtaIndex&)>& body) {
  EmulatedCta c{shape.threads};
  cta::CtaIndex at;
  at.grid_x = shape.grid.x;
  at.grid_y = shape.grid.y;
  at.grid_z = shape.grid.z;
  at.threads = shape.threads;
  for (at.z = 0; at.z < shape.grid.z; ++at.z)
    for (at.y = 0; at.y < shape.grid.y; ++at.y)
      for (at.x = 0; at.x < shape.grid.x; ++at.x) body(c, at);
}

}  // namespace kvsim::test
