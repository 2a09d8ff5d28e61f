#include <cstdio>
#include <string>

#include "cuda_check.h"
#include "kvsim/cuda/device_pool.h"
#include "kvsim/cuda/kv_backends.h"
#include "kvsim/cuda/kv_values.h"

namespace kvsim {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device / no driver" error
    return 0;
  }
  return n;
}

void check_device_memory_fits(int64_t bytes, const char* what) {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  KVSIM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (bytes > static_cast<int64_t>(free_bytes)) {
    char msg[256];
    std::snprintf(msg, sizeof msg,
                  "%s needs %lld bytes (%.2f GiB) but only %zu bytes (%.2f GiB) of %.2f GiB device "
                  "memory are free",
                  what, static_cast<long long>(bytes), static_cast<double>(bytes) / (1 << 30),
                  free_bytes, static_cast<double>(free_bytes) / (1 << 30),
                  static_cast<double>(total_bytes) / (1 << 30));
    throw std::runtime_error(msg);
  }
}

DevicePool::DevicePool(const KvCacheLayout& layout) : layout_(layout) {
  layout_.validate();
  if (cuda_device_count() == 0) throw std::runtime_error("DevicePool: no CUDA device");
  check_device_memory_fits(layout_.pool_bytes(),
                           ("the device KV pool (" + layout_.describe() + ")").c_str());
  KVSIM_CUDA_CHECK(cudaMalloc(&data_, static_cast<size_t>(layout_.pool_bytes())));
  poison(nullptr);
  KVSIM_CUDA_CHECK(cudaDeviceSynchronize());
}

DevicePool::~DevicePool() {
  cudaFree(data_);
}

void DevicePool::poison(CUstream_st* stream) {
  KVSIM_CUDA_CHECK(
      cudaMemsetAsync(data_, kPoisonByte, static_cast<size_t>(layout_.pool_bytes()), stream));
}

}  // namespace kvsim
