// The thread mapping of the CUDA kernels, written once for two executors.
//
// Every kernel of the cuda room is a *CTA body*: a KVSIM_HD function template
// `body(Cta& cta, const CtaIndex& at, ...)` that describes what one CTA does. It never reads
// blockIdx/threadIdx itself; it receives the CTA's coordinates in `at` and runs per-thread work
// through the executor `cta`:
//
//   cta.threads(f)               f(tx) for every thread tx of the CTA. On the GPU each thread
//                                runs f once with its own threadIdx.x; the emulator
//                                (tests/cuda/emulated_grid.h) runs every tx in turn.
//   cta.sync()                   __syncthreads() (the emulator: nothing; each threads() call has
//                                already finished every thread before the next statement).
//   cta.sum(f)                   block sum over tx of f(tx) (uint64, mod 2^64); the result is
//                                valid in thread 0 (cub::BlockReduce on the GPU).
//   cta.exclusive_scan<V>(f, op, g)  block exclusive scan of f(tx) with `op` from V{0}, then g(tx,
//                                prefix) per thread; returns the block aggregate to every thread
//                                (cub::BlockScan, BLOCK_SCAN_WARP_SCANS, on the GPU).
//   cta.atomic_add(p, v), cta.atomic_min(p, v)   atomicAdd / atomicMin (the emulator is
//                                sequential, so plain read-modify-write is exact there).
//
// Rules a body follows so both executors agree: a local declared outside threads() holds the
// same value in every thread (uniform); values computed by one thread reach others only through
// the body's `Shared` struct (a __shared__ variable on the GPU, a local in the emulator) after
// cta.sync(); a body returns early only on a uniform condition.
//
// The launch sizes live here as constexpr values used by both the kernel's __launch_bounds__
// and its launch, so a kernel can never be launched with more threads than ptxas compiled it for
// (tests/cuda/ptxas_resource_check runs ptxas over every architecture and checks
// registers x threads <= 65,536 and no spills).
// Internal (detail/): included by the CTA bodies, their executors and the emulated-grid tests.
#pragma once

#include <cstdint>

#include "kvsim/cuda/detail/hd.h"

namespace kvsim::cta {

// A CTA's place in its grid (the kernels' blockIdx, gridDim and blockDim.x).
struct CtaIndex {
  uint32_t x = 0, y = 0, z = 0;
  uint32_t grid_x = 1, grid_y = 1, grid_z = 1;
  int32_t threads = 1;
};

// Resident threads per SM of the architecture being compiled: 1536 on sm_86, 87, 89 and 12x,
// 2048 on sm_80, 90, 10x (CUDA C Programming Guide, compute capabilities table). Kernels that ask
// for full occupancy in __launch_bounds__ derive their minimum CTAs per SM from it (ptxas rejects
// a minimum that exceeds the SM). The host pass never uses launch bounds; it sees 2048.
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 860 || __CUDA_ARCH__ == 870 || \
                               __CUDA_ARCH__ == 890 || __CUDA_ARCH__ >= 1200)
inline constexpr int32_t kMaxThreadsPerSm = 1536;
#else
inline constexpr int32_t kMaxThreadsPerSm = 2048;
#endif

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

// One kernel launch: grid and CTA size (1-D CTAs everywhere).
struct LaunchShape {
  Dim3 grid;
  int32_t threads = 0;
};

KVSIM_HD constexpr int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
KVSIM_HD constexpr int64_t round_up(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}

// Grid-stride kernels (gen_kv, verify): enough CTAs for one item per thread, at most `max_ctas`
// (the stride loop covers the rest).
inline constexpr int64_t kMaxGridStrideCtas = int64_t{65535} * 16;
inline LaunchShape grid_stride_shape(int64_t items, int32_t threads,
                                     int64_t max_ctas = kMaxGridStrideCtas) {
  const int64_t ctas = ceil_div(items, threads);
  LaunchShape s;
  s.grid.x = static_cast<uint32_t>(ctas < 1 ? 1 : (ctas > max_ctas ? max_ctas : ctas));
  s.threads = threads;
  return s;
}

}  // namespace kvsim::cta
