#include "kvsim/cuda/host_pool.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "kvsim/cuda/kv_values.h"

namespace kvsim {

void AlignedHostBuffer::Free::operator()(unsigned char* p) const {
  std::free(p);
}

AlignedHostBuffer::AlignedHostBuffer(int64_t bytes) : size_(bytes) {
  if (bytes <= 0) return;
  constexpr int64_t kAlign = 64;
  const auto rounded = static_cast<size_t>((bytes + kAlign - 1) / kAlign * kAlign);
  data_.reset(static_cast<unsigned char*>(std::aligned_alloc(kAlign, rounded)));
  if (!data_) {
    throw std::runtime_error(fmt::format("cannot allocate {} bytes of host memory", bytes));
  }
  poison();
}

void AlignedHostBuffer::poison() {
  if (size_ > 0) std::memset(data_.get(), kPoisonByte, static_cast<size_t>(size_));
}

int64_t available_host_memory_bytes() {
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<int64_t>(pages) * page;
}

namespace {
const KvCacheLayout& checked(const KvCacheLayout& layout, int64_t max_bytes) {
  layout.validate();
  const int64_t limit = max_bytes > 0 ? max_bytes : available_host_memory_bytes();
  if (limit > 0 && layout.pool_bytes() > limit) {
    throw std::runtime_error(fmt::format(
        "host KV pool needs {} bytes ({:.2f} GiB: {}) but only {} bytes ({:.2f} GiB) are {}; "
        "reduce the pool's layers (max_layers) or blocks",
        layout.pool_bytes(), static_cast<double>(layout.pool_bytes()) / (1 << 30),
        layout.describe(), limit, static_cast<double>(limit) / (1 << 30),
        max_bytes > 0 ? "allowed" : "available"));
  }
  return layout;
}
}  // namespace

HostPool::HostPool(const KvCacheLayout& layout, int64_t max_bytes)
    : layout_(checked(layout, max_bytes)), buffer_(layout.pool_bytes()) {}

}  // namespace kvsim
