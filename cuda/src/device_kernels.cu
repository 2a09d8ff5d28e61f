// CUDA launches of the kv_ops.h logic. The per-element work is the shared KVSIM_HD code; only the
// thread mapping lives here.
#include <cub/block/block_reduce.cuh>

#include <algorithm>
#include <climits>

#include "cuda_check.h"
#include "kvsim/cuda/device_kernels.h"
#include "kvsim/cuda/kv_ops.h"

namespace kvsim::device {

namespace {

constexpr int kThreads = 256;

int grid_for(int64_t items, int threads) {
  return static_cast<int>(std::clamp<int64_t>((items + threads - 1) / threads, 1, 65535 * 16));
}

// One CTA per (token, staging layer), like reshape_and_cache_flash: the token's K and V rows as
// 16-byte vectors.
__global__ void write_kv_kernel(ops::WriteKvOp op) {
  const int64_t t = blockIdx.x;
  if (op.slot_mapping[t] < 0) return;
  const int32_t li = static_cast<int32_t>(blockIdx.y);
  const int32_t vpt = op.vecs_per_token();
  for (int32_t j = static_cast<int32_t>(threadIdx.x); j < vpt; j += blockDim.x) op.apply(li, t, j);
}

template <class Op>
__global__ void grid_stride_kernel(Op op, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    op(i);
  }
}

// grid (pair, page, chunk): chunk z copies every gridDim.z-th group of blockDim.x vectors.
__global__ void copy_blocks_kernel(ops::CopyBlocksOp op) {
  const int64_t vpp = op.vecs_per_page();
  for (int64_t v = blockIdx.z * int64_t{blockDim.x} + threadIdx.x; v < vpp;
       v += int64_t{gridDim.z} * blockDim.x) {
    op.apply(blockIdx.x, static_cast<int32_t>(blockIdx.y), v);
  }
}

// grid (table entry, page): the page's valid prefix, block-reduced, added to its sequence.
__global__ void gather_kv_kernel(ops::GatherKvOp op, unsigned long long* checksums) {
  using Reduce = cub::BlockReduce<unsigned long long, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ int32_t seq;
  __shared__ int64_t nv;
  const int64_t e = blockIdx.x;
  if (threadIdx.x == 0) {
    seq = op.entry_seq(e);
    nv = op.entry_vecs_per_page(op.entry_tokens(e, seq));
  }
  __syncthreads();
  if (nv == 0) return;
  const BlockId block = op.block_tables[e];
  const int32_t page = static_cast<int32_t>(blockIdx.y);
  unsigned long long sum = 0;
  for (int64_t v = threadIdx.x; v < nv; v += kThreads) sum += op.vec_sum(block, page, v);
  const unsigned long long total = Reduce(tmp).Sum(sum);
  if (threadIdx.x == 0) atomicAdd(&checksums[seq], total);
}

__global__ void verify_kernel(ops::VerifyVecOp op, int64_t n, long long* result) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t bad = op(i);
    if (bad > 0) {
      atomicAdd(reinterpret_cast<unsigned long long*>(&result[0]),
                static_cast<unsigned long long>(bad));
      atomicMin(&result[1], static_cast<long long>(i));
    }
  }
}

}  // namespace

void write_kv(const KvCacheLayout& layout, unsigned char* pool, int32_t layer_begin,
              int32_t num_layers, const unsigned char* key, const unsigned char* value,
              const int64_t* slot_mapping, int64_t num_tokens, CUstream_st* stream) {
  if (num_tokens == 0 || num_layers == 0) return;
  const ops::WriteKvOp op{layout,       pool,       key,         value,
                          slot_mapping, num_tokens, layer_begin, num_layers};
  const int threads = std::min(512, (op.vecs_per_token() + 31) / 32 * 32);
  write_kv_kernel<<<dim3(static_cast<unsigned>(num_tokens), static_cast<unsigned>(num_layers)),
                    threads, 0, stream>>>(op);
  KVSIM_CUDA_CHECK_LAUNCH();
}

void gen_kv(const KvCacheLayout& layout, int32_t layer_begin, int32_t num_layers,
            const int64_t* token_request, const int32_t* token_position, int64_t num_tokens,
            unsigned char* key, unsigned char* value, CUstream_st* stream) {
  const ops::GenKvOp op{layout,         key,        value,       token_request,
                        token_position, num_tokens, layer_begin, num_layers};
  const int64_t n = op.num_items();
  if (n == 0) return;
  grid_stride_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(op, n);
  KVSIM_CUDA_CHECK_LAUNCH();
}

void copy_blocks(const KvCacheLayout& layout, unsigned char* pool, const BlockCopy* pairs,
                 int64_t num_pairs, CUstream_st* stream) {
  if (num_pairs == 0) return;
  const ops::CopyBlocksOp op{layout, pool, pairs, num_pairs};
  // Enough CTAs per page that a single pair still spreads over the SMs (4 vectors per thread).
  const auto chunks =
      static_cast<unsigned>(std::clamp<int64_t>(op.vecs_per_page() / (kThreads * 4), 1, 64));
  copy_blocks_kernel<<<dim3(static_cast<unsigned>(num_pairs),
                            static_cast<unsigned>(op.pages_per_pair()), chunks),
                       kThreads, 0, stream>>>(op);
  KVSIM_CUDA_CHECK_LAUNCH();
}

void gather_kv(const KvCacheLayout& layout, const unsigned char* pool, const int32_t* seq_lens,
               const int32_t* table_offsets, const BlockId* block_tables, int32_t num_seqs,
               int64_t num_entries, uint64_t* checksums, CUstream_st* stream) {
  if (num_seqs == 0) return;
  KVSIM_CUDA_CHECK(cudaMemsetAsync(checksums, 0, sizeof(uint64_t) * num_seqs, stream));
  if (num_entries == 0) return;
  const ops::GatherKvOp op{layout, pool, seq_lens, table_offsets, block_tables, num_seqs};
  gather_kv_kernel<<<dim3(static_cast<unsigned>(num_entries),
                          static_cast<unsigned>(layout.num_layers * layout.num_parts())),
                     kThreads, 0, stream>>>(op, reinterpret_cast<unsigned long long*>(checksums));
  KVSIM_CUDA_CHECK_LAUNCH();
}

void verify_slots(const KvCacheLayout& layout, const unsigned char* pool,
                  const int64_t* slot_request, const int32_t* slot_position, int64_t* d_result,
                  CUstream_st* stream) {
  const long long init[2] = {0, LLONG_MAX};
  KVSIM_CUDA_CHECK(cudaMemcpyAsync(d_result, init, sizeof init, cudaMemcpyHostToDevice, stream));
  const ops::VerifyVecOp op{layout, pool, slot_request, slot_position};
  const int64_t n = op.num_items();
  verify_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(
      op, n, reinterpret_cast<long long*>(d_result));
  KVSIM_CUDA_CHECK_LAUNCH();
  // `init` lives on this stack frame: the copy must finish before returning.
  KVSIM_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace kvsim::device
