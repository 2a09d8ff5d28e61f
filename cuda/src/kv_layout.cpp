#include "kvsim/cuda/kv_layout.h"

#include <fmt/format.h>

#include <limits>
#include <stdexcept>

namespace kvsim {

KvDtype parse_kv_dtype(std::string_view name) {
  if (name == "bfloat16" || name == "bf16") return KvDtype::kBf16;
  if (name == "float16" || name == "fp16" || name == "half") return KvDtype::kFp16;
  if (name == "fp8" || name == "fp8_e4m3") return KvDtype::kFp8E4m3;
  if (name == "float32" || name == "fp32" || name == "float") return KvDtype::kFp32;
  throw std::invalid_argument(fmt::format(
      "unknown KV dtype '{}' (expected bfloat16, float16, fp8, fp8_e4m3 or float32)", name));
}

const char* kv_dtype_name(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kBf16:
      return "bfloat16";
    case KvDtype::kFp16:
      return "float16";
    case KvDtype::kFp8E4m3:
      return "fp8_e4m3";
    case KvDtype::kFp32:
      return "float32";
  }
  return "?";
}

KvLayoutKind parse_kv_layout(std::string_view name) {
  if (name == "nhd") return KvLayoutKind::kNhdPacked;
  if (name == "legacy") return KvLayoutKind::kLegacySplit;
  throw std::invalid_argument(fmt::format("unknown KV layout '{}' (expected nhd or legacy)", name));
}

const char* kv_layout_name(KvLayoutKind layout) {
  return layout == KvLayoutKind::kNhdPacked ? "nhd" : "legacy";
}

void KvCacheLayout::validate() const {
  auto positive = [](const char* field, int64_t v) {
    if (v <= 0)
      throw std::invalid_argument(fmt::format("KV layout: {} = {} must be > 0", field, v));
  };
  positive("num_blocks", num_blocks);
  positive("block_size", block_size);
  positive("num_layers", num_layers);
  positive("num_kv_heads", num_kv_heads);
  positive("head_dim", head_dim);
  if (head_row_bytes() % 16 != 0) {
    throw std::invalid_argument(fmt::format(
        "KV layout: head_dim = {} x {} bytes ({}) is not a multiple of 16 bytes (the kernels move "
        "16-byte vectors)",
        head_dim, elem_bytes(), kv_dtype_name(dtype)));
  }
  // Every size below is a product of positive factors; check the largest against int64.
  const double bytes = static_cast<double>(token_layer_bytes()) * static_cast<double>(block_size) *
                       static_cast<double>(num_blocks) * static_cast<double>(num_layers);
  if (bytes >= static_cast<double>(std::numeric_limits<int64_t>::max() / 2)) {
    throw std::invalid_argument(fmt::format("KV layout: pool of {:.3g} bytes is too large", bytes));
  }
}

std::string KvCacheLayout::describe() const {
  return fmt::format("{} layers x {} blocks x {} tokens x {} heads x {} dim, {}, {} ({:.2f} GiB)",
                     num_layers, num_blocks, block_size, num_kv_heads, head_dim,
                     kv_dtype_name(dtype), kv_layout_name(layout),
                     static_cast<double>(pool_bytes()) / (1024.0 * 1024.0 * 1024.0));
}

}  // namespace kvsim
