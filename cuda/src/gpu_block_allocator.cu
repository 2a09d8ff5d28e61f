// GpuBlockAllocator: a device free stack; one single-CTA launch per batched allocate or free.
#include <vector>

#include "cuda_check.h"
#include "device_cta.cuh"
#include "kvsim/cuda/block_allocator.h"
#include "kvsim/cuda/detail/block_allocator_bodies.h"

namespace kvsim {

namespace {

__global__ void __launch_bounds__(cta::kAllocateThreads) allocate_kernel(cta::AllocateArgs args) {
  __shared__ cta::AllocateShared sh;
  cta::DeviceCta<cta::kAllocateThreads> c;
  cta::allocate_cta(c, args, sh);
}

__global__ void __launch_bounds__(cta::kFreeThreads) free_kernel(cta::FreeArgs args) {
  __shared__ cta::FreeShared sh;
  cta::DeviceCta<cta::kFreeThreads> c;
  cta::free_cta(c, args, sh);
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
  const cta::AllocateArgs args{d_stack_, d_count_, d_demands, n, d_offsets, d_block_ids, d_status};
  allocate_kernel<<<1, cta::kAllocateThreads, 0, stream>>>(args);
  KVSIM_CUDA_CHECK_LAUNCH();
}

void GpuBlockAllocator::free_async(const BlockId* d_blocks, int64_t n, int32_t* d_status,
                                   CUstream_st* stream) const {
  const cta::FreeArgs args{d_stack_, d_count_, num_blocks_, d_blocks, n, d_status};
  free_kernel<<<1, cta::kFreeThreads, 0, stream>>>(args);
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
