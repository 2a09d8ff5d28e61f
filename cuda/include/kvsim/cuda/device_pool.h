// DevicePool: a KV pool in device memory (one cudaMalloc arena in KvCacheLayout's layout; never
// managed memory), poisoned (every byte kPoisonByte) at construction.
//
// Construction checks the layout and free device memory first and refuses (std::runtime_error
// with requested and free bytes) instead of failing inside cudaMalloc. Only in CUDA builds; the
// header is CUDA-free.
#pragma once

#include <cstdint>

#include "kvsim/cuda/kv_layout.h"

struct CUstream_st;

namespace kvsim {

class DevicePool {
 public:
  explicit DevicePool(const KvCacheLayout& layout);
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  const KvCacheLayout& layout() const { return layout_; }
  unsigned char* data() { return data_; }
  const unsigned char* data() const { return data_; }
  int64_t bytes() const { return layout_.pool_bytes(); }
  void poison(CUstream_st* stream);

 private:
  KvCacheLayout layout_;
  unsigned char* data_ = nullptr;
};

// Throws std::runtime_error (requested vs free bytes, what for) when `bytes` more device memory
// would not fit.
void check_device_memory_fits(int64_t bytes, const char* what);

}  // namespace kvsim
