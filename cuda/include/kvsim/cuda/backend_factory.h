// make_kv_backend: the one entry point sim/cli use to pick a KV storage backend.
//
// kind null: no storage (the default replay); host: HostKvBackend; cuda: CudaKvBackend.
//
// Real model shapes make big pools (Llama-3.1-8B, 30k blocks of 16: 60 GiB), fine on an H200 but
// not in host RAM. `max_layers` (> 0) keeps only that many layers in the pool: the allocator,
// slot mapping, block tables and verification are unchanged, bytes and times scale by
// max_layers / num_layers (the replay can rescale them). The host backend also refuses a pool
// above `max_host_pool_bytes` (0 = the machine's available memory) with the numbers.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "kvsim/core/kv_backend.h"
#include "kvsim/core/planner.h"
#include "kvsim/cuda/kv_layout.h"

namespace kvsim {

enum class KvBackendKind : uint8_t { kNull, kHost, kCuda };

// null | host | cuda; throws std::invalid_argument naming the value otherwise.
KvBackendKind parse_kv_backend_kind(std::string_view name);

struct KvBackendConfig {
  KvBackendKind kind = KvBackendKind::kNull;
  int64_t num_blocks = 0;  // pool size N, null block included
  int32_t block_size = kDefaultBlockSize;
  int32_t num_layers = 1;
  int32_t num_kv_heads = 1;
  int32_t head_dim = 128;
  KvDtype dtype = KvDtype::kBf16;
  KvLayoutKind layout = KvLayoutKind::kNhdPacked;
  int64_t host_swap_slots = 0;  // host blocks for swap preemption (0: swaps are rejected)
  int32_t max_layers = 0;       // > 0: cap the pool's layer count (see above)
  int64_t max_host_pool_bytes = 0;
  // Grouped layouts (hybrid, or one window group: see KVCacheConfig::is_single_full_attention):
  // each KV cache group's layer count; num_layers is then the number of KV cache tensors (vLLM's
  // group size), each shared by one layer of every group. Empty: one full-attention group.
  // max_layers caps the tensors and every group alike.
  std::vector<int32_t> group_num_layers;

  // The pool layout this config yields (num_layers capped by max_layers).
  KvCacheLayout pool_layout() const;
  // group_num_layers capped by max_layers.
  std::vector<int32_t> pool_group_num_layers() const;
  // Model layers whose KV the pool holds: its layers, or for grouped layouts the sum over groups
  // (gpt-oss-20b with max_layers 2: 2 tensors, 4 of its 24 layers).
  int32_t pool_model_layers() const;
};

// The config for a planned pool (`kvsim replay`, the Python package): N, shape and dtype from the
// plan, and for grouped layouts the tensors and groups of plan.kv_cache_config (vLLM 0.26's hybrid
// layout: one tensor per position in a group, shared across groups).
KvBackendConfig kv_backend_config_for(const Plan& plan, KvBackendKind kind, int32_t block_size,
                                      int64_t host_swap_slots, int32_t max_layers);

// Throws std::invalid_argument for a bad shape, std::runtime_error for `cuda` in a build without
// CUDA or on a machine without a device, or for a pool that does not fit.
std::unique_ptr<KvBackend> make_kv_backend(const KvBackendConfig& config);

}  // namespace kvsim
