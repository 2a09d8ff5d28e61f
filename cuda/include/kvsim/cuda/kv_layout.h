// KvCacheLayout: the physical shape of a paged KV pool, shared by the device pool and the host
// twin.
//
// Two layouts (vLLM's vllm/v1/attention/backends/flash_attn.py
// FlashAttentionBackend.get_kv_cache_shape and get_kv_cache_stride_order):
//   * kNhdPacked (vLLM 0.26, default): per layer (num_blocks, block_size, num_kv_heads,
//   2*head_dim),
//     K and V packed in the last dim: element (slot, head, d) of K is at column d, of V at D + d.
//     A block's page is one contiguous range per layer (num_parts() == 1).
//   * kLegacySplit (vLLM <= 0.21): per layer (2, num_blocks, block_size, num_kv_heads, head_dim):
//     every K page, then every V page (num_parts() == 2).
// The pool is one arena: layer l occupies [l * layer_bytes(), (l + 1) * layer_bytes()), which
// addresses exactly like vLLM's one-tensor-per-layer.
//
// Elements are stored as raw bits of dtype's width; kvsim never does float arithmetic on them.
// Invariants (validate()): every count > 0, head_dim * elem_bytes() is a multiple of 16 (the
// kernels move 16-byte vectors, like vLLM's vectorized fast path), num_blocks * block_size fits
// an int64 slot id and the pool size fits int64 bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kvsim/core/types.h"
#include "kvsim/cuda/detail/hd.h"

namespace kvsim {

enum class KvDtype : uint8_t { kBf16, kFp16, kFp8E4m3, kFp32 };
enum class KvLayoutKind : uint8_t { kNhdPacked, kLegacySplit };

// Accepts vLLM's --kv-cache-dtype spellings: bfloat16|bf16, float16|fp16|half, fp8|fp8_e4m3,
// float32|fp32|float. Throws std::invalid_argument naming the value otherwise.
KvDtype parse_kv_dtype(std::string_view name);
const char* kv_dtype_name(KvDtype dtype);
// nhd (default, v0.26) | legacy. Throws std::invalid_argument otherwise.
KvLayoutKind parse_kv_layout(std::string_view name);
const char* kv_layout_name(KvLayoutKind layout);

struct KvCacheLayout {
  int64_t num_blocks = 0;
  int32_t block_size = kDefaultBlockSize;
  int32_t num_layers = 1;
  int32_t num_kv_heads = 1;
  int32_t head_dim = 128;
  KvDtype dtype = KvDtype::kBf16;
  KvLayoutKind layout = KvLayoutKind::kNhdPacked;

  KVSIM_HD int32_t elem_bytes() const {
    return dtype == KvDtype::kFp8E4m3 ? 1 : (dtype == KvDtype::kFp32 ? 4 : 2);
  }
  KVSIM_HD int32_t num_parts() const { return layout == KvLayoutKind::kNhdPacked ? 1 : 2; }
  // Bytes of one D-element K (or V) row of one head.
  KVSIM_HD int64_t head_row_bytes() const { return int64_t{head_dim} * elem_bytes(); }
  // Distance between consecutive heads of one token inside a part.
  KVSIM_HD int64_t head_pitch_bytes() const { return head_row_bytes() * (3 - num_parts()); }
  // Bytes one token occupies in one part (packed: K and V of every head).
  KVSIM_HD int64_t token_part_bytes() const { return head_pitch_bytes() * num_kv_heads; }
  // Bytes one token occupies in one layer (K and V).
  KVSIM_HD int64_t token_layer_bytes() const { return 2 * head_row_bytes() * num_kv_heads; }
  // One block's contiguous range in one part of one layer.
  KVSIM_HD int64_t page_bytes() const { return token_part_bytes() * block_size; }
  KVSIM_HD int64_t part_stride_bytes() const { return page_bytes() * num_blocks; }
  KVSIM_HD int64_t layer_bytes() const { return part_stride_bytes() * num_parts(); }
  KVSIM_HD int64_t pool_bytes() const { return layer_bytes() * num_layers; }
  // One block across every layer and part: the unit of a swap.
  KVSIM_HD int64_t block_bytes_all_layers() const {
    return page_bytes() * num_parts() * num_layers;
  }
  KVSIM_HD int64_t num_slots() const { return num_blocks * block_size; }
  KVSIM_HD int32_t vecs_per_head_row() const { return static_cast<int32_t>(head_row_bytes() / 16); }

  // Byte offset in the arena of block `block`'s page for (layer, part).
  KVSIM_HD int64_t page_offset(int32_t layer, int32_t part, int64_t block) const {
    return layer * layer_bytes() + part * part_stride_bytes() + block * page_bytes();
  }
  // Byte offset of the K (kv = 0) or V (kv = 1) row of `head` for `slot` in `layer`.
  KVSIM_HD int64_t head_row_offset(int32_t layer, int64_t slot, int32_t head, int32_t kv) const {
    const int64_t part = num_parts() == 2 ? kv : 0;
    const int64_t inner = num_parts() == 1 ? kv * head_row_bytes() : 0;
    return layer * layer_bytes() + part * part_stride_bytes() + slot * token_part_bytes() +
           head * head_pitch_bytes() + inner;
  }

  // Throws std::invalid_argument naming the first bad field and its value.
  void validate() const;
  // "32 layers x 1024 blocks x 16 tokens x 8 heads x 128 dim, bf16, nhd (8.00 GiB)".
  std::string describe() const;
};

}  // namespace kvsim
