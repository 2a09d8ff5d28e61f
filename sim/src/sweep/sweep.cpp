// Sweep grid expansion, sharding and the parallel runner.
#include "kvsim/sim/sweep/sweep.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <exception>
#include <new>
#include <set>
#include <stdexcept>
#include <thread>

#include <fmt/core.h>

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

namespace {

template <typename T>
void check_axis(const std::vector<T>& values, std::string_view flag) {
  std::set<T> seen;
  for (const T& v : values) {
    if constexpr (std::is_arithmetic_v<T>) {
      if (!(v > 0)) {
        throw std::invalid_argument(fmt::format("{}: values must be > 0, got {}", flag, v));
      }
    } else {
      if (v.empty()) throw std::invalid_argument(fmt::format("{}: empty value", flag));
    }
    if (!seen.insert(v).second) {
      throw std::invalid_argument(fmt::format("{}: value {} given twice", flag, v));
    }
  }
}

// An axis with no values contributes one "unset" entry.
template <typename T>
std::vector<std::optional<T>> axis_values(const std::vector<T>& values) {
  if (values.empty()) return {std::nullopt};
  return {values.begin(), values.end()};
}

}  // namespace

std::vector<SweepPoint> expand_sweep(const SweepAxes& axes) {
  check_axis(axes.block_sizes, "--block-sizes");
  check_axis(axes.gpu_memory_utilizations, "--gpu-memory-utilizations");
  for (double u : axes.gpu_memory_utilizations) {
    if (u > 1.0) {
      throw std::invalid_argument(
          fmt::format("--gpu-memory-utilizations: values must be in (0, 1], got {}", u));
    }
  }
  check_axis(axes.num_gpu_blocks, "--num-gpu-blocks");
  check_axis(axes.kv_cache_dtypes, "--kv-cache-dtypes");
  check_axis(axes.max_num_seqs, "--max-num-seqs");
  check_axis(axes.max_num_batched_tokens, "--max-num-batched-tokens");
  if (!axes.gpu_memory_utilizations.empty() && !axes.num_gpu_blocks.empty()) {
    throw std::invalid_argument(
        "--gpu-memory-utilizations and --num-gpu-blocks both size the pool: give one");
  }
  std::vector<SweepPoint> points;
  for (const auto& bs : axis_values(axes.block_sizes)) {
    for (const auto& util : axis_values(axes.gpu_memory_utilizations)) {
      for (const auto& blocks : axis_values(axes.num_gpu_blocks)) {
        for (const auto& dtype : axis_values(axes.kv_cache_dtypes)) {
          for (const auto& seqs : axis_values(axes.max_num_seqs)) {
            for (const auto& budget : axis_values(axes.max_num_batched_tokens)) {
              SweepPoint p;
              p.index = static_cast<int64_t>(points.size());
              p.block_size = bs;
              p.gpu_memory_utilization = util;
              p.num_gpu_blocks = blocks;
              p.kv_cache_dtype = dtype;
              p.max_num_seqs = seqs;
              p.max_num_batched_tokens = budget;
              points.push_back(std::move(p));
            }
          }
        }
      }
    }
  }
  return points;
}

ShardSpec parse_shard(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return std::invalid_argument(
        fmt::format("--shard '{}': {} (expected I/N with 0 <= I < N, e.g. 0/4)", text, why));
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
  if (jobs < 1) throw std::invalid_argument(fmt::format("--jobs must be >= 1, got {}", jobs));
  std::vector<const SweepPoint*> mine;
  for (const SweepPoint& p : points) {
    if (shard.contains(p.index)) mine.push_back(&p);
  }
  std::vector<SweepRow> rows(mine.size());
  std::vector<std::exception_ptr> errors(mine.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  // Each worker claims the next unclaimed point (in grid order) and writes only its own slots.
  // After a failure no new point is handed out. Claims are ordered, so every point below a
  // failing one was claimed and runs to completion: the lowest failing point overall is always
  // among the recorded failures, whatever `jobs` is.
  auto work = [&] {
    while (!stop.load(std::memory_order_relaxed)) {
      const size_t i = next.fetch_add(1);
      if (i >= mine.size()) return;
      try {
        rows[i].point = *mine[i];
        rows[i].outcome = runner(*mine[i]);
        rows[i].expected = expected_padding(lengths, rows[i].outcome.block_size);
      } catch (...) {
        errors[i] = std::current_exception();
        stop.store(true, std::memory_order_relaxed);
      }
    }
  };
  const size_t num_threads = std::min<size_t>(static_cast<size_t>(jobs), mine.size());
  if (num_threads <= 1) {
    work();
  } else {
    std::vector<std::jthread> threads;
    threads.reserve(num_threads);
    for (size_t t = 0; t < num_threads; ++t) threads.emplace_back(work);
  }
  for (size_t i = 0; i < mine.size(); ++i) {
    if (!errors[i]) continue;
    const std::string where =
        fmt::format("sweep config {} ({})", mine[i]->index, mine[i]->describe());
    try {
      std::rethrow_exception(errors[i]);
    } catch (const std::bad_alloc&) {
      throw;  // out of memory stays itself (the CLI reports it as such)
    } catch (const std::invalid_argument& e) {
      std::throw_with_nested(std::invalid_argument(fmt::format("{}: {}", where, e.what())));
    } catch (const std::exception& e) {
      std::throw_with_nested(std::runtime_error(fmt::format("{}: {}", where, e.what())));
    } catch (...) {
      std::throw_with_nested(std::runtime_error(where + ": unknown error"));
    }
  }
  return rows;
}

}  // namespace kvsim
