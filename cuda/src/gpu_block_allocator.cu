// GpuBlockAllocator: a device free stack; one single-CTA launch per batched allocate or free.
#include <cub/block/block_scan.cuh>

#include <vector>

#include "cuda_check.h"
#include "kvsim/cuda/block_allocator.h"

namespace kvsim {

namespace {

constexpr int kThreads = 1024;

// Scan the demands tile by tile (carrying the running total), then, if the stack holds enough
// blocks, every thread takes its share of the flat output: output k = k-th block below the top.
__global__ void allocate_kernel(BlockId* stack, int64_t* count, const int32_t* demands, int32_t n,
                                int32_t* offsets, BlockId* out, int32_t* status) {
  using Scan = cub::BlockScan<int64_t, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int64_t carry;
  __shared__ int bad;
  if (threadIdx.x == 0) {
    carry = 0;
    bad = 0;
  }
  __syncthreads();
  for (int32_t base = 0; base < n; base += kThreads) {
    const int32_t i = base + static_cast<int32_t>(threadIdx.x);
    const int64_t d = i < n ? demands[i] : 0;
    if (d < 0) bad = 1;
    int64_t excl = 0;
    int64_t tile_total = 0;
    Scan(tmp).ExclusiveSum(d, excl, tile_total);
    if (i < n) offsets[i] = static_cast<int32_t>(carry + excl);
    __syncthreads();
    if (threadIdx.x == 0) carry += tile_total;
    __syncthreads();
  }
  const int64_t total = carry;
  const int64_t c = *count;
  if (bad || total > c) {
    if (threadIdx.x == 0) {
      *status = static_cast<int32_t>(bad ? AllocStatus::kBadInput : AllocStatus::kOutOfBlocks);
    }
    return;
  }
  const ops::StackTakeOp take{stack, c, out};
  for (int64_t k = threadIdx.x; k < total; k += kThreads) take(k);
  __syncthreads();  // every thread read `*count` before it changes
  if (threadIdx.x == 0) {
    offsets[n] = static_cast<int32_t>(total);
    *count = c - total;
    *status = static_cast<int32_t>(AllocStatus::kOk);
  }
}

__global__ void free_kernel(BlockId* stack, int64_t* count, int32_t num_blocks,
                            const BlockId* freed, int64_t n, int32_t* status) {
  __shared__ int bad;
  if (threadIdx.x == 0) bad = 0;
  __syncthreads();
  const int64_t c = *count;
  for (int64_t k = threadIdx.x; k < n; k += kThreads) {
    if (freed[k] < 1 || freed[k] >= num_blocks) bad = 1;
  }
  __syncthreads();
  if (bad || c + n > num_blocks - 1) {
    if (threadIdx.x == 0) *status = static_cast<int32_t>(AllocStatus::kBadInput);
    return;
  }
  const ops::StackPushOp push{stack, c, freed, n};
  for (int64_t k = threadIdx.x; k < n; k += kThreads) push(k);
  __syncthreads();
  if (threadIdx.x == 0) {
    *count = c + n;
    *status = static_cast<int32_t>(AllocStatus::kOk);
  }
}

template <class T>
T* device_alloc(size_t n) {
  T* p = nullptr;
  KVSIM_CUDA_CHECK(cudaMalloc(&p, sizeof(T) * (n == 0 ? 1 : n)));
  return p;
}

// RAII for the host wrappers' temporaries.
struct DeviceScratch {
  std::vector<void*> ptrs;
  template <class T>
  T* get(size_t n) {
    ptrs.push_back(device_alloc<T>(n));
    return static_cast<T*>(ptrs.back());
  }
  ~DeviceScratch() {
    for (void* p : ptrs) cudaFree(p);
  }
};

}  // namespace

GpuBlockAllocator::GpuBlockAllocator(int32_t num_blocks) : num_blocks_(num_blocks) {
  if (num_blocks < 1) {
    throw std::invalid_argument("GpuBlockAllocator: num_blocks = " + std::to_string(num_blocks) +
                                " must be >= 1");
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    throw std::runtime_error("GpuBlockAllocator: no CUDA device");
  }
  std::vector<BlockId> init(static_cast<size_t>(num_blocks - 1));
  for (int32_t i = 0; i < num_blocks - 1; ++i) init[static_cast<size_t>(i)] = num_blocks - 1 - i;
  const int64_t count = num_blocks - 1;
  d_stack_ = device_alloc<BlockId>(init.size());
  d_count_ = device_alloc<int64_t>(1);
  KVSIM_CUDA_CHECK(
      cudaMemcpy(d_stack_, init.data(), sizeof(BlockId) * init.size(), cudaMemcpyHostToDevice));
  KVSIM_CUDA_CHECK(cudaMemcpy(d_count_, &count, sizeof count, cudaMemcpyHostToDevice));
}

GpuBlockAllocator::~GpuBlockAllocator() {
  cudaFree(d_stack_);
  cudaFree(d_count_);
}

void GpuBlockAllocator::allocate_async(const int32_t* d_demands, int32_t n, int32_t* d_offsets,
                                       BlockId* d_block_ids, int32_t* d_status,
                                       CUstream_st* stream) const {
  allocate_kernel<<<1, kThreads, 0, stream>>>(d_stack_, d_count_, d_demands, n, d_offsets,
                                              d_block_ids, d_status);
  KVSIM_CUDA_CHECK_LAUNCH();
}

void GpuBlockAllocator::free_async(const BlockId* d_blocks, int64_t n, int32_t* d_status,
                                   CUstream_st* stream) const {
  free_kernel<<<1, kThreads, 0, stream>>>(d_stack_, d_count_, num_blocks_, d_blocks, n, d_status);
  KVSIM_CUDA_CHECK_LAUNCH();
}

bool GpuBlockAllocator::allocate(std::span<const int32_t> demands, std::vector<int32_t>& offsets,
                                 std::vector<BlockId>& block_ids) {
  const auto n = static_cast<int32_t>(demands.size());
  DeviceScratch s;
  int32_t* d_demands = s.get<int32_t>(demands.size());
  int32_t* d_offsets = s.get<int32_t>(demands.size() + 1);
  BlockId* d_ids = s.get<BlockId>(static_cast<size_t>(num_blocks_));
  int32_t* d_status = s.get<int32_t>(1);
  KVSIM_CUDA_CHECK(cudaMemcpy(d_demands, demands.data(), sizeof(int32_t) * demands.size(),
                              cudaMemcpyHostToDevice));
  allocate_async(d_demands, n, d_offsets, d_ids, d_status, nullptr);
  int32_t status = 0;
  KVSIM_CUDA_CHECK(cudaMemcpy(&status, d_status, sizeof status, cudaMemcpyDeviceToHost));
  if (status == static_cast<int32_t>(AllocStatus::kBadInput)) {
    throw std::invalid_argument("GpuBlockAllocator::allocate: negative demand");
  }
  if (status != static_cast<int32_t>(AllocStatus::kOk)) return false;
  offsets.resize(demands.size() + 1);
  KVSIM_CUDA_CHECK(cudaMemcpy(offsets.data(), d_offsets, sizeof(int32_t) * offsets.size(),
                              cudaMemcpyDeviceToHost));
  block_ids.resize(static_cast<size_t>(offsets.back()));
  KVSIM_CUDA_CHECK(cudaMemcpy(block_ids.data(), d_ids, sizeof(BlockId) * block_ids.size(),
                              cudaMemcpyDeviceToHost));
  return true;
}

void GpuBlockAllocator::free(std::span<const BlockId> blocks) {
  DeviceScratch s;
  BlockId* d_blocks = s.get<BlockId>(blocks.size());
  int32_t* d_status = s.get<int32_t>(1);
  KVSIM_CUDA_CHECK(
      cudaMemcpy(d_blocks, blocks.data(), sizeof(BlockId) * blocks.size(), cudaMemcpyHostToDevice));
  free_async(d_blocks, static_cast<int64_t>(blocks.size()), d_status, nullptr);
  int32_t status = 0;
  KVSIM_CUDA_CHECK(cudaMemcpy(&status, d_status, sizeof status, cudaMemcpyDeviceToHost));
  if (status != static_cast<int32_t>(AllocStatus::kOk)) {
    throw std::invalid_argument(
        "GpuBlockAllocator::free: a block id is outside [1, num_blocks) or the free overflows "
        "the pool (double free?)");
  }
}

int64_t GpuBlockAllocator::num_free() const {
  int64_t count = 0;
  KVSIM_CUDA_CHECK(cudaMemcpy(&count, d_count_, sizeof count, cudaMemcpyDeviceToHost));
  return count;
}

std::vector<BlockId> GpuBlockAllocator::free_ids_top_first() const {
  const int64_t count = num_free();
  std::vector<BlockId> ids(static_cast<size_t>(count));
  KVSIM_CUDA_CHECK(
      cudaMemcpy(ids.data(), d_stack_, sizeof(BlockId) * ids.size(), cudaMemcpyDeviceToHost));
  return {ids.rbegin(), ids.rend()};
}

}  // namespace kvsim
