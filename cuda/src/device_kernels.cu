// CUDA launches of the kv_kernel_bodies.h CTA bodies. Each kernel declares __launch_bounds__
// with the same constexpr its launch uses (kernel_bodies.h), so ptxas compiles it for the CTA
// size it really gets (tests/cuda/ptxas_resource_check checks the result for every architecture).
#include <algorithm>
#include <climits>

#include "cuda_check.h"
#include "device_cta.cuh"
#include "kvsim/cuda/detail/kv_kernel_bodies.h"
#include "kvsim/cuda/device_kernels.h"

namespace kvsim::device {

namespace {

using cta::CtaIndex;
using cta::DeviceCta;

__global__ void __launch_bounds__(cta::kWriteKvThreads) write_kv_kernel(ops::WriteKvOp op) {
  DeviceCta<cta::kWriteKvThreads> c;
  cta::write_kv_cta(c, c.index(), op);
}

__global__ void __launch_bounds__(cta::kGenKvThreads) gen_kv_kernel(ops::GenKvOp op, int64_t n) {
  DeviceCta<cta::kGenKvThreads> c;
  cta::gen_kv_cta(c, c.index(), op, n);
}

__global__ void __launch_bounds__(cta::kCopyBlocksThreads, cta::kCopyBlocksMinCtasPerSm)
    copy_blocks_kernel(ops::CopyBlocksOp op) {
  DeviceCta<cta::kCopyBlocksThreads> c;
  cta::copy_blocks_cta(c, c.index(), op);
}

__global__ void __launch_bounds__(cta::kGatherKvThreads)
    gather_kv_kernel(ops::GatherKvOp op, unsigned long long* checksums) {
  __shared__ cta::GatherKvShared sh;
  DeviceCta<cta::kGatherKvThreads> c;
  cta::gather_kv_cta(c, c.index(), op, checksums, sh);
}

__global__ void __launch_bounds__(cta::kVerifyThreads)
    verify_kernel(ops::VerifyVecOp op, int64_t n, long long* result) {
  DeviceCta<cta::kVerifyThreads> c;
  cta::verify_cta(c, c.index(), op, n, result);
}

dim3 to_dim3(const cta::Dim3& d) {
  return {d.x, d.y, d.z};
}

// CTAs of copy_blocks_kernel the current device holds at once (SMs x resident CTAs per SM),
// remembered per thread for the last device asked about.
int64_t copy_blocks_resident_ctas() {
  thread_local int cached_device = -1;
  thread_local int64_t cached_ctas = 0;
  int device = 0;
  KVSIM_CUDA_CHECK(cudaGetDevice(&device));
  if (device != cached_device) {
    int sms = 0;
    int per_sm = 0;
    KVSIM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    KVSIM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, copy_blocks_kernel,
                                                                   cta::kCopyBlocksThreads, 0));
    cached_ctas = int64_t{sms} * per_sm;
    cached_device = device;
  }
  return cached_ctas;
}

}  // namespace

void write_kv(const KvCacheLayout& layout, unsigned char* pool, int32_t layer_begin,
              int32_t num_layers, const unsigned char* key, const unsigned char* value,
              const int64_t* slot_mapping, int64_t num_tokens, CUstream_st* stream) {
  if (num_tokens == 0 || num_layers == 0) return;
  const ops::WriteKvOp op{layout,       pool,       key,         value,
                          slot_mapping, num_tokens, layer_begin, num_layers};
  const cta::LaunchShape shape = cta::write_kv_shape(op);
  write_kv_kernel<<<to_dim3(shape.grid), shape.threads, 0, stream>>>(op);
  KVSIM_CUDA_CHECK_LAUNCH();
}

void gen_kv(const KvCacheLayout& layout, int32_t layer_begin, int32_t num_layers,
            const int64_t* token_request, const int32_t* token_position, int64_t num_tokens,
            unsigned char* key, unsigned char* value, CUstream_st* stream) {
  const ops::GenKvOp op{layout,         key,        value,       token_request,
                        token_position, num_tokens, layer_begin, num_layers};
  const int64_t n = op.num_items();
  if (n == 0) return;
  const cta::LaunchShape shape = cta::grid_stride_shape(n, cta::kGenKvThreads);
  gen_kv_kernel<<<to_dim3(shape.grid), shape.threads, 0, stream>>>(op, n);
  KVSIM_CUDA_CHECK_LAUNCH();
}

void copy_blocks(const KvCacheLayout& layout, unsigned char* pool, const BlockCopy* pairs,
                 int64_t num_pairs, CUstream_st* stream) {
  if (num_pairs == 0) return;
  const ops::CopyBlocksOp op{layout, pool, pairs, num_pairs};
  const cta::LaunchShape shape = cta::copy_blocks_shape(op, copy_blocks_resident_ctas());
  copy_blocks_kernel<<<to_dim3(shape.grid), shape.threads, 0, stream>>>(op);
  KVSIM_CUDA_CHECK_LAUNCH();
}

void gather_kv(const KvCacheLayout& layout, const unsigned char* pool, const int32_t* seq_lens,
               const int32_t* table_offsets, const BlockId* block_tables, int32_t num_seqs,
               int64_t num_entries, uint64_t* checksums, CUstream_st* stream) {
  if (num_seqs == 0) return;
  KVSIM_CUDA_CHECK(cudaMemsetAsync(checksums, 0, sizeof(uint64_t) * num_seqs, stream));
  if (num_entries == 0) return;
  const ops::GatherKvOp op{layout, pool, seq_lens, table_offsets, block_tables, num_seqs};
  const cta::LaunchShape shape = cta::gather_kv_shape(op, num_entries);
  gather_kv_kernel<<<to_dim3(shape.grid), shape.threads, 0, stream>>>(
      op, reinterpret_cast<unsigned long long*>(checksums));
  KVSIM_CUDA_CHECK_LAUNCH();
}

void verify_slots(const KvCacheLayout& layout, const unsigned char* pool,
                  const int64_t* slot_request, const int32_t* slot_position, int64_t* d_result,
                  CUstream_st* stream, const int32_t* slot_group, const int32_t* group_num_layers) {
  const long long init[2] = {0, LLONG_MAX};
  KVSIM_CUDA_CHECK(cudaMemcpyAsync(d_result, init, sizeof init, cudaMemcpyHostToDevice, stream));
  const ops::VerifyVecOp op{layout,        pool,       slot_request,
                            slot_position, slot_group, group_num_layers};
  const int64_t n = op.num_items();
  const cta::LaunchShape shape = cta::grid_stride_shape(n, cta::kVerifyThreads);
  verify_kernel<<<to_dim3(shape.grid), shape.threads, 0, stream>>>(
      op, n, reinterpret_cast<long long*>(d_result));
  KVSIM_CUDA_CHECK_LAUNCH();
  // `init` lives on this stack frame: the copy must finish before returning.
  KVSIM_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace kvsim::device
