#include "kvsim/cuda/backend_factory.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "kvsim/cuda/kv_backends.h"

namespace kvsim {

KvBackendKind parse_kv_backend_kind(std::string_view name) {
  if (name == "null") return KvBackendKind::kNull;
  if (name == "host") return KvBackendKind::kHost;
  if (name == "cuda") return KvBackendKind::kCuda;
  throw std::invalid_argument(
      fmt::format("unknown KV backend '{}' (expected null, host or cuda)", name));
}

KvCacheLayout KvBackendConfig::pool_layout() const {
  KvCacheLayout l;
  l.num_blocks = num_blocks;
  l.block_size = block_size;
  l.num_layers = max_layers > 0 ? std::min(num_layers, max_layers) : num_layers;
  l.num_kv_heads = num_kv_heads;
  l.head_dim = head_dim;
  l.dtype = dtype;
  l.layout = layout;
  return l;
}

std::unique_ptr<KvBackend> make_kv_backend(const KvBackendConfig& config) {
  if (config.kind == KvBackendKind::kNull) return std::make_unique<NullKvBackend>();
  if (config.max_layers < 0) {
    throw std::invalid_argument(
        fmt::format("KV backend: max_layers = {} must be >= 0", config.max_layers));
  }
  const KvCacheLayout layout = config.pool_layout();
  layout.validate();
  if (config.kind == KvBackendKind::kHost) {
    return std::make_unique<HostKvBackend>(layout, config.host_swap_slots,
                                           config.max_host_pool_bytes);
  }
  return std::make_unique<CudaKvBackend>(layout, config.host_swap_slots);
}

}  // namespace kvsim
