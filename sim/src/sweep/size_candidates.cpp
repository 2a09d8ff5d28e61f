// kvsim size: the candidate grid (card x TP x KV dtype x block size x max_num_seqs).
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "kvsim/core/model_presets.h"
#include "kvsim/core/param.h"
#include "kvsim/core/planner.h"
#include "kvsim/sim/sweep/grid_axis.h"
#include "kvsim/sim/sweep/size.h"

namespace kvsim {
std::string SizeCandidate::describe() const {
  std::string s = fmt::format("{} tp={} kv={}", gpu, tensor_parallel_size, kv_cache_dtype);
  if (block_size) s += fmt::format(" bs={}", *block_size);
  if (max_num_seqs) s += fmt::format(" seqs={}", *max_num_seqs);
  return s;
}

std::vector<SizeCandidate> expand_size_candidates(const SizeAxes& axes) {
  if (axes.gpus.empty()) {
    throw std::invalid_argument(param("gpus") + ": at least one GPU is required");
  }
  if (axes.tensor_parallel_sizes.empty()) {
    throw std::invalid_argument(param("tp") + ": at least one tensor-parallel size is required");
  }
  // Canonical names first, so "H100-80G,h100-80g" is caught as a duplicate.
  std::vector<std::string> gpus;
  for (const std::string& name : axes.gpus) {
    try {
      gpus.push_back(find_gpu_preset(name).name);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("{}: {}", param("gpus"), e.what()));
    }
  }
  check_grid_axis(gpus, "gpus");
  check_grid_axis(axes.tensor_parallel_sizes, "tp");
  for (int32_t tp : axes.tensor_parallel_sizes) {
    if (tp > kMaxTensorParallelSize) {
      throw std::invalid_argument(fmt::format("{}: {} is above the largest supported size {}",
                                              param("tp"), tp, kMaxTensorParallelSize));
    }
  }
  const std::vector<std::string> dtypes =
      axes.kv_cache_dtypes.empty() ? std::vector<std::string>{"auto"} : axes.kv_cache_dtypes;
  check_grid_axis(dtypes, "kv_cache_dtype");
  check_grid_axis(axes.block_sizes, "block_sizes");
  check_grid_axis(axes.max_num_seqs, "max_num_seqs");

  // A (card, TP) group is the candidates of one card and TP: the inner axes' product.
  const auto block_sizes = grid_axis_values(axes.block_sizes);
  const auto max_num_seqs = grid_axis_values(axes.max_num_seqs);
  const auto group_size =
      static_cast<int64_t>(dtypes.size() * block_sizes.size() * max_num_seqs.size());
  std::vector<SizeCandidate> out;
  for_each_grid_point(
      [&out, group_size](const std::string& gpu, int32_t tp, const std::string& dtype,
                         const std::optional<int32_t>& bs, const std::optional<int32_t>& seqs) {
        const auto index = static_cast<int64_t>(out.size());
        out.push_back({.index = index,
                       .group = index / group_size,
                       .gpu = gpu,
                       .tensor_parallel_size = tp,
                       .kv_cache_dtype = dtype,
                       .block_size = bs,
                       .max_num_seqs = seqs});
      },
      gpus, axes.tensor_parallel_sizes, dtypes, block_sizes, max_num_seqs);
  return out;
}

}  // namespace kvsim
