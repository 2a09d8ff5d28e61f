// CTA bodies of GpuBlockAllocator's kernels (one CTA per launch; see cta.h for the executor
// contract). gpu_block_allocator.cu launches them; tests/cuda runs them on an emulated CTA.
// Internal (detail/): included by the cuda room's kernels and the emulated-grid tests only.
#pragma once

#include <cstdint>

#include "kvsim/core/types.h"
#include "kvsim/cuda/block_allocator.h"
#include "kvsim/cuda/detail/cta.h"
#include "kvsim/cuda/detail/hd.h"

namespace kvsim::cta {

inline constexpr int32_t kAllocateThreads = 1024;
inline constexpr int32_t kFreeThreads = 1024;

// The allocation scan runs over 32-bit counts with a saturating add. That is exact whenever the
// allocation can succeed: the total is then <= the free count <= num_blocks - 1 < kScanCap, so no
// partial sum ever reached the cap. Once a partial sum saturates, the total is >= kScanCap > the
// free count, and the allocation fails, whatever the exact value. Inputs are <= kScanCap, so
// a + b <= 2^32 - 2 never wraps, and min(a + b, cap) is associative on [0, cap] (a valid scan
// operator). 32-bit values let CUB's warp-scan algorithm fit 1024 threads in the register file;
// the former 64-bit default (raking) scan needed 89 registers per thread on sm_90.
inline constexpr uint32_t kScanCap = 0x7fffffffu;
struct SaturatingAdd {
  KVSIM_HD uint32_t operator()(uint32_t a, uint32_t b) const {
    return a + b < kScanCap ? a + b : kScanCap;
  }
};

struct AllocateArgs {
  BlockId* stack;
  int64_t* count;
  const int32_t* demands;
  int32_t n;
  int32_t* offsets;  // n + 1 entries
  BlockId* out;
  int32_t* status;  // an AllocStatus
};

struct AllocateShared {
  int32_t bad;  // a negative demand was seen
};

// Scan the demands tile by tile (carrying the running total), then, if the stack holds enough
// blocks, every thread takes its share of the flat output: output k = k-th block below the top.
template <class Cta>
KVSIM_HD void allocate_cta(Cta& cta, const AllocateArgs& a, AllocateShared& sh) {
  cta.threads([&](int32_t tx) {
    if (tx == 0) sh.bad = 0;
  });
  cta.sync();
  int64_t carry = 0;  // uniform: every thread adds the same block aggregates
  for (int64_t base = 0; base < a.n; base += kAllocateThreads) {
    const uint32_t tile_total = cta.template exclusive_scan<uint32_t>(
        [&](int32_t tx) -> uint32_t {
          const int64_t i = base + tx;
          if (i >= a.n) return 0;
          const int32_t d = a.demands[i];
          if (d < 0) sh.bad = 1;
          return d < 0 ? 0u : static_cast<uint32_t>(d);
        },
        SaturatingAdd{},
        [&](int32_t tx, uint32_t prefix) {
          const int64_t i = base + tx;
          // Exact on success (see kScanCap); ignored by the caller otherwise.
          if (i < a.n) a.offsets[i] = static_cast<int32_t>((carry + prefix) & 0x7fffffff);
        });
    carry += tile_total;
  }
  cta.sync();  // sh.bad from every tile
  const int64_t c = *a.count;
  if (sh.bad != 0 || carry > c) {
    cta.threads([&](int32_t tx) {
      if (tx == 0) {
        *a.status =
            static_cast<int32_t>(sh.bad != 0 ? AllocStatus::kBadInput : AllocStatus::kOutOfBlocks);
      }
    });
    return;
  }
  const int64_t total = carry;
  const ops::StackTakeOp take{a.stack, c, a.out};
  cta.threads([&](int32_t tx) {
    for (int64_t k = tx; k < total; k += kAllocateThreads) take(k);
  });
  cta.sync();  // every thread read `*count` before it changes
  cta.threads([&](int32_t tx) {
    if (tx == 0) {
      a.offsets[a.n] = static_cast<int32_t>(total);
      *a.count = c - total;
      *a.status = static_cast<int32_t>(AllocStatus::kOk);
    }
  });
}

struct FreeArgs {
  BlockId* stack;
  int64_t* count;
  int32_t num_blocks;
  const BlockId* freed;
  int64_t n;
  int32_t* status;
};

struct FreeShared {
  int32_t bad;  // an id outside [1, num_blocks)
};

template <class Cta>
KVSIM_HD void free_cta(Cta& cta, const FreeArgs& a, FreeShared& sh) {
  cta.threads([&](int32_t tx) {
    if (tx == 0) sh.bad = 0;
  });
  cta.sync();
  const int64_t c = *a.count;
  cta.threads([&](int32_t tx) {
    for (int64_t k = tx; k < a.n; k += kFreeThreads) {
      if (a.freed[k] < 1 || a.freed[k] >= a.num_blocks) sh.bad = 1;
    }
  });
  cta.sync();
  if (sh.bad != 0 || c + a.n > a.num_blocks - 1) {
    cta.threads([&](int32_t tx) {
      if (tx == 0) *a.status = static_cast<int32_t>(AllocStatus::kBadInput);
    });
    return;
  }
  const ops::StackPushOp push{a.stack, c, a.freed, a.n};
  cta.threads([&](int32_t tx) {
    for (int64_t k = tx; k < a.n; k += kFreeThreads) push(k);
  });
  cta.sync();
  cta.threads([&](int32_t tx) {
    if (tx == 0) {
      *a.count = c + a.n;
      *a.status = static_cast<int32_t>(AllocStatus::kOk);
    }
  });
}

}  // namespace kvsim::cta
