// Builds without CUDA: the device classes exist (so callers link) but refuse to construct.
#ifndef KVSIM_HAVE_CUDA

#include <stdexcept>

#include "kvsim/cuda/block_allocator.h"
#include "kvsim/cuda/kv_backends.h"

namespace kvsim {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw std::runtime_error(std::string(what) +
                           " needs CUDA, but kvsim was built without it (configure with "
                           "-DKVSIM_CUDA=ON on a machine with nvcc)");
}
}  // namespace

int cuda_device_count() {
  return 0;
}

struct CudaKvBackend::Impl {};
CudaKvBackend::CudaKvBackend(const KvCacheLayout&, int64_t, std::vector<int32_t>) {
  no_cuda("the cuda KV backend");
}
CudaKvBackend::~CudaKvBackend() = default;
StepExecution CudaKvBackend::execute(const StepBatch&) {
  no_cuda("the cuda KV backend");
}
BackendVerification CudaKvBackend::verify() {
  no_cuda("the cuda KV backend");
}
const KvCacheLayout& CudaKvBackend::layout() const {
  no_cuda("the cuda KV backend");
}
std::span<const uint64_t> CudaKvBackend::last_read_checksums() const {
  no_cuda("the cuda KV backend");
}
bool CudaKvBackend::uses_batched_memcpy() const {
  return false;
}

GpuBlockAllocator::GpuBlockAllocator(int32_t num_blocks) : num_blocks_(num_blocks) {
  no_cuda("the GPU block allocator");
}
GpuBlockAllocator::~GpuBlockAllocator() = default;
void GpuBlockAllocator::allocate_async(const int32_t*, int32_t, int32_t*, BlockId*, int32_t*,
                                       CUstream_st*) const {
  no_cuda("the GPU block allocator");
}
void GpuBlockAllocator::free_async(const BlockId*, int64_t, int32_t*, CUstream_st*) const {
  no_cuda("the GPU block allocator");
}
bool GpuBlockAllocator::allocate(std::span<const int32_t>, std::vector<int32_t>&,
                                 std::vector<BlockId>&) {
  no_cuda("the GPU block allocator");
}
void GpuBlockAllocator::free(std::span<const BlockId>) {
  no_cuda("the GPU block allocator");
}
int64_t GpuBlockAllocator::num_free() const {
  no_cuda("the GPU block allocator");
}
std::vector<BlockId> GpuBlockAllocator::free_ids_top_first() const {
  no_cuda("the GPU block allocator");
}

}  // namespace kvsim

#endif  // KVSIM_HAVE_CUDA
