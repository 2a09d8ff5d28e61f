// HostPool: a KV pool in ordinary host memory (the host twin's "device"), in KvCacheLayout's
// layout, 64-byte aligned and poisoned (every byte kPoisonByte) at construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kvsim/cuda/kv_layout.h"

namespace kvsim {

// 64-byte-aligned, poisoned host buffer. Throws std::runtime_error when allocation fails.
class AlignedHostBuffer {
 public:
  AlignedHostBuffer() = default;
  explicit AlignedHostBuffer(int64_t bytes);
  unsigned char* data() { return data_.get(); }
  const unsigned char* data() const { return data_.get(); }
  int64_t size() const { return size_; }
  void poison();

 private:
  struct Free {
    void operator()(unsigned char* p) const;
  };
  std::unique_ptr<unsigned char, Free> data_;
  int64_t size_ = 0;
};

class HostPool {
 public:
  // Validates the layout; refuses (std::runtime_error with requested vs available bytes) a pool
  // larger than max_bytes, or than the machine's available memory when max_bytes == 0.
  explicit HostPool(const KvCacheLayout& layout, int64_t max_bytes = 0);

  const KvCacheLayout& layout() const { return layout_; }
  unsigned char* data() { return buffer_.data(); }
  const unsigned char* data() const { return buffer_.data(); }
  int64_t bytes() const { return buffer_.size(); }
  void poison() { buffer_.poison(); }

 private:
  KvCacheLayout layout_;
  AlignedHostBuffer buffer_;
};

// Bytes of physical memory currently available (sysconf); 0 when unknown.
int64_t available_host_memory_bytes();

}  // namespace kvsim
