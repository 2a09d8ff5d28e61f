// Sweep grid expansion, sharding and the parallel runner.
#include "kvsim/sim/sweep/sweep.h"

#include "kvsim/sim/sweep/grid_axis.h"
#include "kvsim/sim/sweep/run_units_in_order.h"

#include <algorithm>
#include <charconv>
#include <exception>
#include <stdexcept>

#include <fmt/core.h>

#include "kvsim/core/param.h"

namespace kvsim {

std::string SweepPoint::describe() const {
  std::string s;
  auto add = [&s](std::string_view key, const auto& value) {
    if (!s.empty()) s += ' ';
    s += fmt::format("{}={}", key, value);
  };
  if (block_size) add("block_size", *block_size);
  if (gpu_memory_utilization) add("gpu_memory_utilization", *gpu_memory_utilization);
  if (num_gpu_blocks) add("num_gpu_blocks", *num_gpu_blocks);
  if (kv_cache_dtype) add("kv_cache_dtype", *kv_cache_dtype);
  if (max_num_seqs) add("max_num_seqs", *max_num_seqs);
  if (max_num_batched_tokens) add("max_num_batched_tokens", *max_num_batched_tokens);
  return s.empty() ? "base" : s;
}

std::vector<SweepPoint> expand_sweep(const SweepAxes& axes) {
  check_grid_axis(axes.block_sizes, "block_sizes");
  check_grid_axis(axes.gpu_memory_utilizations, "gpu_memory_utilizations");
  for (double u : axes.gpu_memory_utilizations) {
    if (u > 1.0) {
      throw std::invalid_argument(
          fmt::format("{}: values must be in (0, 1], got {}", param("gpu_memory_utilizations"), u));
    }
  }
  check_grid_axis(axes.num_gpu_blocks, "num_gpu_blocks");
  check_grid_axis(axes.kv_cache_dtypes, "kv_cache_dtypes");
  check_grid_axis(axes.max_num_seqs, "max_num_seqs");
  check_grid_axis(axes.max_num_batched_tokens, "max_num_batched_tokens");
  if (!axes.gpu_memory_utilizations.empty() && !axes.num_gpu_blocks.empty()) {
    throw std::invalid_argument(param("gpu_memory_utilizations") + " and " +
                                param("num_gpu_blocks") + " both size the pool: give one");
  }
  std::vector<SweepPoint> points;
  for_each_grid_point(
      [&points](const auto& bs, const auto& util, const auto& blocks, const auto& dtype,
                const auto& seqs, const auto& budget) {
        points.push_back({.index = static_cast<int64_t>(points.size()),
                          .block_size = bs,
                          .gpu_memory_utilization = util,
                          .num_gpu_blocks = blocks,
                          .kv_cache_dtype = dtype,
                          .max_num_seqs = seqs,
                          .max_num_batched_tokens = budget});
      },
      grid_axis_values(axes.block_sizes), grid_axis_values(axes.gpu_memory_utilizations),
      grid_axis_values(axes.num_gpu_blocks), grid_axis_values(axes.kv_cache_dtypes),
      grid_axis_values(axes.max_num_seqs), grid_axis_values(axes.max_num_batched_tokens));
  return points;
}

ShardSpec parse_shard(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return std::invalid_argument(fmt::format("{}: {} (expected I/N with 0 <= I < N, e.g. 0/4)",
                                             param("shard", fmt::format("'{}'", text)), why));
  };
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) throw bad("missing '/'");
  const auto parse = [&](std::string_view part) {
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc{} || ptr != part.data() + part.size()) {
      throw bad(fmt::format("'{}' is not an integer", part));
    }
    return v;
  };
  ShardSpec s;
  s.index = parse(text.substr(0, slash));
  s.count = parse(text.substr(slash + 1));
  if (s.count < 1) throw bad("N must be >= 1");
  if (s.index < 0 || s.index >= s.count) throw bad("I must be in [0, N)");
  return s;
}

std::vector<SweepRow> run_sweep(std::span<const SweepPoint> points, const SweepRunner& runner,
                                std::span<const SequenceLengths> lengths, int32_t jobs,
                                const ShardSpec& shard) {
  if (jobs < 1) {
    throw std::invalid_argument(fmt::format("{} must be >= 1, got {}", param("jobs"), jobs));
  }
  std::vector<const SweepPoint*> mine;
  for (const SweepPoint& p : points) {
    if (shard.contains(p.index)) mine.push_back(&p);
  }
  std::vector<SweepRow> rows(mine.size());
  const std::vector<std::exception_ptr> errors =
      run_units_in_order(mine.size(), jobs, [&](size_t i) {
        rows[i].point = *mine[i];
        rows[i].outcome = runner(*mine[i]);
        rows[i].expected = expected_padding(lengths, rows[i].outcome.block_size);
      });
  for (size_t i = 0; i < mine.size(); ++i) {
    if (errors[i]) {
      rethrow_with_context(
          errors[i], fmt::format("sweep config {} ({})", mine[i]->index, mine[i]->describe()));
    }
  }
  return rows;
}

}  // namespace kvsim
