// kvsim sweep: a Cartesian grid of replay configurations over one trace, run in parallel or in
// shards, written as one deterministic CSV; plus the analytic expectation of last-block padding.
//
// The library knows nothing about how a configuration is replayed: the caller (cli/sweep_command)
// passes a SweepRunner that turns one SweepPoint into a SweepOutcome. Each call must be
// independent of every other (no shared mutable state), because run_sweep() calls the runner
// from `jobs` threads at once. Output does not depend on `jobs`: rows are kept in grid order.
// CSV columns, sharding and merging: docs/sweep.md.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvsim/core/planner.h"
#include "kvsim/sim/engine/replay_setup.h"
#include "kvsim/sim/sched/scheduler.h"
#include "kvsim/sim/traces/trace.h"

namespace kvsim {

// The swept values. An empty axis is not swept: the replay's own (base) setting applies.
// gpu_memory_utilizations and num_gpu_blocks size the pool two ways; at most one may be given.
struct SweepAxes {
  std::vector<int32_t> block_sizes;
  std::vector<double> gpu_memory_utilizations;
  std::vector<int64_t> num_gpu_blocks;
  std::vector<std::string> kv_cache_dtypes;
  std::vector<int32_t> max_num_seqs;
  std::vector<int32_t> max_num_batched_tokens;
};

// One grid point. `index` is its position in grid order (0-based, dense); unset fields keep the
// base setting. Grid order nests block size outermost, then pool (utilization or blocks), KV
// dtype, max_num_seqs, token budget innermost.
struct SweepPoint {
  int64_t index = 0;
  std::optional<int32_t> block_size;
  std::optional<double> gpu_memory_utilization;
  std::optional<int64_t> num_gpu_blocks;
  std::optional<std::string> kv_cache_dtype;
  std::optional<int32_t> max_num_seqs;
  std::optional<int32_t> max_num_batched_tokens;

  // "block_size=16 kv_cache_dtype=fp8" (set fields only; "base" when none), for messages.
  std::string describe() const;
};

// Throws std::invalid_argument when an axis holds a non-positive or duplicate value, a
// utilization outside (0, 1], or both pool axes are given.
std::vector<SweepPoint> expand_sweep(const SweepAxes& axes);

// What one replay produced, with the configuration it actually ran (base settings resolved).
struct SweepOutcome {
  // Effective configuration.
  int32_t block_size = 0;
  int64_t num_gpu_blocks = 0;
  double gpu_memory_utilization = 0;  // 0 when the pool size was given in blocks
  std::string kv_cache_dtype;
  int32_t max_num_seqs = 0;
  int32_t max_num_batched_tokens = 0;
  double vllm_max_concurrency = 0;      // num_gpu_blocks / cdiv(max_model_len, block_size)
  int64_t formula_max_concurrency = 0;  // the lesson's N_seq (pool override: N * bs / L)
  // Replay results (the replay JSON's keys of the same names).
  int64_t requests = 0;
  int64_t finished = 0;
  int64_t rejected = 0;
  int64_t steps = 0;
  double sim_seconds = 0;
  int64_t peak_running = 0;
  double mean_running = 0;
  int64_t preemptions = 0;
  int64_t recomputed_tokens = 0;
  double padding_tokens_mean = 0;    // mean over steps of sum over live requests
  double padding_fraction_mean = 0;  // mean over steps of padding / used KV tokens
  double peak_kv_usage = 0;
  double prefix_cache_hit_rate = 0;
  double ttft_p50_s = 0;
  double ttft_p99_s = 0;
  double tpot_p50_s = 0;
  double tpot_p99_s = 0;
};

// Prompt and output length of one request, for the analytic padding expectation.
struct SequenceLengths {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
};

// Analytic last-block padding for block size bs.
//   uniform_per_seq = (bs - 1) / 2: a sequence's length mod bs uniformly distributed.
//   per_seq        = the same expectation taken exactly over the trace: each request contributes
//                    waste(l) = (bs - l mod bs) mod bs at every length l it holds in the steps
//                    that sample its tokens: l = input (last prefill step, samples token 1) ..
//                    input + output - 1 (decode step of the last token), one step each, so
//                    per_seq = sum_r sum_l waste(l) / sum_r output_r (time-weighted by steps)
//   fraction       = sum_r sum_l waste(l) / sum_r sum_l bs * cdiv(l, bs)  (padding / used KV)
// Requests with output 0 count as output 1 (vLLM generates at least one token). Not modelled:
// prefill chunks, prefix sharing, preemption, max_model_len caps (docs/sweep.md).
struct PaddingExpectation {
  double uniform_per_seq = 0;
  double per_seq = 0;
  double fraction = 0;
};
PaddingExpectation expected_padding(std::span<const SequenceLengths> requests, int32_t block_size);

// One CSV row: the grid point, what ran, and the expectation for its block size.
struct SweepRow {
  SweepPoint point;
  SweepOutcome outcome;
  PaddingExpectation expected;
};

using SweepRunner = std::function<SweepOutcome(const SweepPoint&)>;

// Which grid points this process runs: those with index % count == index_of_shard.
struct ShardSpec {
  int64_t index = 0;
  int64_t count = 1;
  bool contains(int64_t point_index) const { return point_index % count == index; }
};
// Parses "I/N" (0 <= I < N). Throws std::invalid_argument naming the flag and the text.
ShardSpec parse_shard(std::string_view text);

// Runs the runner over the points of `shard` with `jobs` threads (jobs >= 1) and returns their
// rows in grid order. After a runner throws, no further point is started; every started run is
// joined. The lowest-index failure (deterministic: independent of `jobs`) is rethrown:
// std::bad_alloc as itself; otherwise std::invalid_argument (for an invalid_argument) or
// std::runtime_error prefixed "sweep config I (description): ", with the original nested
// (std::throw_with_nested).
std::vector<SweepRow> run_sweep(std::span<const SweepPoint> points, const SweepRunner& runner,
                                std::span<const SequenceLengths> lengths, int32_t jobs,
                                const ShardSpec& shard = {});

// CSV: a header line, then one line per row in the given order. `num_configs` (the size of the
// whole grid) and `sweep_id` (a fingerprint of everything that defines the sweep: trace, model,
// card, scheduler flags, grid; see sweep_fingerprint) are written in every row so --merge can
// detect missing shards and shards of different sweeps. sweep_id is written as 16 hex digits.
std::string sweep_csv_header();
void write_sweep_csv(std::ostream& out, std::span<const SweepRow> rows, int64_t num_configs,
                     uint64_t sweep_id = 0);

// FNV-1a 64 of a canonical description of a sweep (the caller decides what goes in; it must
// not depend on --shard, --jobs or output paths). Stable across builds and platforms.
uint64_t sweep_fingerprint(std::string_view canonical);

// Joins shard CSVs (contents, with their names for messages): headers must be identical and
// equal to sweep_csv_header(); every row must have exactly the header's field count, each field
// a valid value of its column's type (integers canonical: no sign, no leading zero), and the
// file must end in a newline; every row must agree on num_configs and sweep_id, no config index
// may appear twice, and together they must cover 0 .. num_configs-1; no row may contradict
// itself or the other rows (sweep_merge_checks.h). Returns the merged CSV, rows
// sorted by config index: byte-identical to an unsharded run's CSV. Throws std::invalid_argument
// naming the file and line (and column for a bad field).
struct NamedText {
  std::string name;
  std::string text;
};
std::string merge_sweep_csvs(std::span<const NamedText> shards);

// A fixed-width text table of the rows (what `kvsim sweep` prints).
std::string format_sweep_table(std::span<const SweepRow> rows);

// ---- Running one grid point as a replay (what `kvsim sweep` plugs into run_sweep) ----

// The settings every grid point starts from; a point's axes override them. Unset batch limits
// take vLLM's `vllm serve` defaults for the card (make_replay_config, replay_setup.h).
struct SweepBase {
  PlanInputs plan;          // model, card, block size, pool, KV dtype, max_model_len
  ReplaySettings settings;  // scheduler policy knobs and batch limits (records are never kept)
  std::string step_time = "roofline";  // --step-time spec
};

// Plans the pool for the point (plan_replay_pool with the point's overrides), builds the replay
// config (make_replay_config: the same rules as `kvsim replay`) and step-time model, replays
// `trace` on the null backend and returns the outcome. max_model_len: resolve_max_model_len.
// Throws std::invalid_argument for a pool with no usable block (N < 2) or a scheduler config
// validate() refuses.
// Safe to call concurrently (shares only const data).
SweepOutcome replay_sweep_point(const SweepBase& base, const Trace& trace, const SweepPoint& point);

// The lengths expected_padding() needs, from a trace.
std::vector<SequenceLengths> trace_lengths(const Trace& trace);

}  // namespace kvsim
