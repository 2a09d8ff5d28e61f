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

std::vector<int32_t> KvBackendConfig::pool_group_num_layers() const {
  std::vector<int32_t> layers = group_num_layers;
  if (max_layers > 0) {
    for (int32_t& n : layers) n = std::min(n, max_layers);
  }
  return layers;
}

int32_t KvBackendConfig::pool_model_layers() const {
  if (group_num_layers.empty()) return pool_layout().num_layers;
  int32_t total = 0;
  for (int32_t n : pool_group_num_layers()) total += n;
  return total;
}

KvBackendConfig kv_backend_config_for(const Plan& plan, KvBackendKind kind, int32_t block_size,
                                      int64_t host_swap_slots, int32_t max_layers) {
  KvBackendConfig bc;
  bc.kind = kind;
  bc.num_blocks = plan.num_gpu_blocks;
  bc.block_size = block_size;
  bc.num_layers = static_cast<int32_t>(plan.num_layers);
  bc.num_kv_heads = static_cast<int32_t>(plan.num_kv_heads_per_rank);
  bc.head_dim = static_cast<int32_t>(plan.head_dim);
  bc.dtype = parse_kv_dtype(plan.kv_cache_dtype);
  bc.max_layers = max_layers;
  bc.host_swap_slots = host_swap_slots;
  const KVCacheConfig& kv = plan.kv_cache_config;
  if (!kv.kv_cache_groups.empty() && !kv.is_single_full_attention()) {
    bc.num_layers = static_cast<int32_t>(kv.kv_cache_tensors.size());
    for (const KVCacheGroupSpec& g : kv.kv_cache_groups) {
      bc.group_num_layers.push_back(static_cast<int32_t>(g.layer_indices.size()));
    }
  }
  return bc;
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
    return std::make_unique<HostKvBackend>(
        layout, config.host_swap_slots, config.max_host_pool_bytes, config.pool_group_num_layers());
  }
  return std::make_unique<CudaKvBackend>(layout, config.host_swap_slots,
                                         config.pool_group_num_layers());
}

}  // namespace kvsim
