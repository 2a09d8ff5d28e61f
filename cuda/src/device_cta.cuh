// The GPU executor of the CTA bodies (kvsim/cuda/detail/cta.h): one CUDA thread per body thread.
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "kvsim/cuda/detail/cta.h"

namespace kvsim::cta {

// kThreads: the CTA size the kernel is launched with and declares in __launch_bounds__ (CUB's
// block algorithms are sized by it).
template <int kThreads>
struct DeviceCta {
  static __device__ CtaIndex index() {
    return {blockIdx.x,
            blockIdx.y,
            blockIdx.z,
            gridDim.x,
            gridDim.y,
            gridDim.z,
            static_cast<int32_t>(blockDim.x)};
  }
  template <class F>
  __device__ void threads(F&& f) const {
    f(static_cast<int32_t>(threadIdx.x));
  }
  __device__ void sync() const { __syncthreads(); }
  // Valid in thread 0.
  template <class F>
  __device__ unsigned long long sum(F&& f) const {
    using Reduce = cub::BlockReduce<unsigned long long, kThreads>;
    __shared__ typename Reduce::TempStorage tmp;
    return Reduce(tmp).Sum(static_cast<unsigned long long>(f(static_cast<int32_t>(threadIdx.x))));
  }
  template <class V, class F, class Op, class G>
  __device__ V exclusive_scan(F&& value, Op op, G&& use) const {
    using Scan = cub::BlockScan<V, kThreads, cub::BLOCK_SCAN_WARP_SCANS>;
    __shared__ typename Scan::TempStorage tmp;
    const auto tx = static_cast<int32_t>(threadIdx.x);
    V prefix{};
    V aggregate{};
    Scan(tmp).ExclusiveScan(value(tx), prefix, V{0}, op, aggregate);
    use(tx, prefix);
    __syncthreads();  // `tmp` is reused by the next call
    return aggregate;
  }
  __device__ void atomic_add(unsigned long long* p, unsigned long long v) const { atomicAdd(p, v); }
  __device__ void atomic_min(long long* p, long long v) const { atomicMin(p, v); }
};

}  // namespace kvsim::cta
