// `kvsim sweep TRACE`: replay one trace over a Cartesian grid of configurations; CSV + table.
// `kvsim sweep --merge a.csv b.csv ... -o all.csv`: join shard CSVs. See docs/sweep.md.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "commands.h"
#include "kvsim/sim/sweep.h"
#include "kvsim/sim/trace.h"
#include "plan_options.h"
#include "trace_options.h"

namespace kvsim::cli {
namespace {

struct SweepOptions {
  std::string trace_path;
  PlanOptions plan;
  TraceReadOptions trace;
  SweepAxes axes;
  // Scheduler knobs that are not swept (names as `vllm serve` / `kvsim replay`).
  int32_t long_prefill_token_threshold = 0;
  bool no_chunked_prefill = false;
  bool no_prefix_caching = false;
  std::string policy = "fcfs";
  double watermark = 0.0;
  bool no_reserve_full_isl = false;
  int32_t num_lookahead_tokens = 0;
  std::string step_time = "roofline";
  // Execution and output.
  int32_t jobs = 1;
  std::string shard;
  std::string csv_path;
  bool quiet = false;
  std::vector<std::string> merge;
  std::string output;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open for reading", path));
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw std::runtime_error(fmt::format("{}: read error", path));
  return s.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error(fmt::format("{}: cannot open for writing", path));
  out << text;
  out.close();
  if (!out) throw std::runtime_error(fmt::format("{}: write error", path));
}

void run_merge(const SweepOptions& o) {
  if (!o.trace_path.empty()) {
    throw std::invalid_argument("--merge takes CSV files, not a TRACE");
  }
  std::vector<NamedText> shards;
  for (const std::string& path : o.merge) shards.push_back({path, read_file(path)});
  const std::string merged = merge_sweep_csvs(shards);
  if (o.output.empty() || o.output == "-") {
    std::fwrite(merged.data(), 1, merged.size(), stdout);
  } else {
    write_file(o.output, merged);
    fmt::print(stderr, "kvsim sweep: merged {} files into {}\n", shards.size(), o.output);
  }
}

void run_sweep_command(const SweepOptions& o) {
  if (!o.merge.empty()) return run_merge(o);
  if (o.trace_path.empty()) {
    throw std::invalid_argument("sweep: a TRACE file is required (or --merge CSV...)");
  }
  if (!o.output.empty()) throw std::invalid_argument("-o/--output is for --merge; use --csv");
  const ShardSpec shard = o.shard.empty() ? ShardSpec{} : parse_shard(o.shard);
  const std::vector<SweepPoint> points = expand_sweep(o.axes);

  SweepBase base;
  base.plan = resolve_plan_inputs(o.plan);
  base.scheduler.long_prefill_token_threshold = o.long_prefill_token_threshold;
  base.scheduler.enable_chunked_prefill = !o.no_chunked_prefill;
  base.scheduler.enable_prefix_caching = !o.no_prefix_caching;
  base.scheduler.policy =
      o.policy == "priority" ? SchedulingPolicy::PRIORITY : SchedulingPolicy::FCFS;
  base.scheduler.watermark = o.watermark;
  base.scheduler.scheduler_reserve_full_isl = !o.no_reserve_full_isl;
  base.scheduler.num_lookahead_tokens = o.num_lookahead_tokens;
  base.step_time = o.step_time;

  const Trace trace = read_trace(o.trace_path, o.trace);
  const std::vector<SequenceLengths> lengths = trace_lengths(trace);
  const auto runner = [&base, &trace](const SweepPoint& p) {
    return replay_sweep_point(base, trace, p);
  };
  const std::vector<SweepRow> rows = run_sweep(points, runner, lengths, o.jobs, shard);

  const auto num_configs = static_cast<int64_t>(points.size());
  if (!o.csv_path.empty()) {
    std::ostringstream csv;
    write_sweep_csv(csv, rows, num_configs);
    if (o.csv_path == "-") {
      std::cout << csv.str() << std::flush;
    } else {
      write_file(o.csv_path, csv.str());
    }
  }
  if (!o.quiet && o.csv_path != "-") {
    fmt::print("kvsim sweep: {} ({} requests), {} of {} configs{}, model {}, gpu {}\n", trace.path,
               trace.requests.size(), rows.size(), num_configs,
               o.shard.empty() ? "" : fmt::format(" (shard {})", o.shard), base.plan.model.name,
               base.plan.gpu.name);
    fmt::print("{}", format_sweep_table(rows));
    fmt::print(
        "pad% = measured mean padding / used KV; pad%exp, exp/seq = analytic expectation "
        "(docs/sweep.md); conc = vLLM max concurrency\n");
  }
}

}  // namespace

void register_sweep_command(CLI::App& app) {
  auto opts = std::make_shared<SweepOptions>();
  SweepOptions& o = *opts;
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "Replay one trace over a grid of block sizes, pool sizes, KV dtypes and batch limits");
  cmd->add_option("TRACE", o.trace_path, "Trace file (any format kvsim replay reads)");
  add_model_card_options(cmd, o.plan);
  add_trace_options(cmd, o.trace);

  const char* grid = "Sweep grid (comma-separated lists)";
  cmd->add_option("--block-sizes", o.axes.block_sizes, "Block sizes, e.g. 1,8,16,32,64,128,256")
      ->delimiter(',')
      ->group(grid);
  cmd->add_option("--gpu-memory-utilizations", o.axes.gpu_memory_utilizations,
                  "Memory utilizations, e.g. 0.8,0.9,0.92")
      ->delimiter(',')
      ->group(grid);
  cmd->add_option("--num-gpu-blocks", o.axes.num_gpu_blocks,
                  "Pool sizes in blocks (instead of utilizations)")
      ->delimiter(',')
      ->group(grid);
  cmd->add_option("--kv-cache-dtypes", o.axes.kv_cache_dtypes, "KV dtypes, e.g. bfloat16,fp8")
      ->delimiter(',')
      ->group(grid);
  cmd->add_option("--max-num-seqs", o.axes.max_num_seqs,
                  "max_num_seqs values (default: vLLM's for the card)")
      ->delimiter(',')
      ->group(grid);
  cmd->add_option("--max-num-batched-tokens", o.axes.max_num_batched_tokens,
                  "Token budgets per step (default: vLLM's for the card)")
      ->delimiter(',')
      ->group(grid);

  const char* sched = "Scheduler";
  cmd->add_option("--long-prefill-token-threshold", o.long_prefill_token_threshold,
                  "Cap prefill chunks of long prompts (0 = off)")
      ->check(CLI::NonNegativeNumber)
      ->group(sched);
  cmd->add_flag("--no-enable-chunked-prefill", o.no_chunked_prefill, "Disable chunked prefill")
      ->group(sched);
  cmd->add_flag("--no-enable-prefix-caching", o.no_prefix_caching, "Disable prefix caching")
      ->group(sched);
  cmd->add_option("--scheduling-policy", o.policy, "fcfs|priority")
      ->check(CLI::IsMember({"fcfs", "priority"}))
      ->capture_default_str()
      ->group(sched);
  cmd->add_option("--watermark", o.watermark, "Free-block watermark fraction in [0, 1)")
      ->check(CLI::Range(0.0, 0.999999))
      ->group(sched);
  cmd->add_flag("--no-scheduler-reserve-full-isl", o.no_reserve_full_isl,
                "Admit without reserving the full prompt")
      ->group(sched);
  cmd->add_option("--num-lookahead-tokens", o.num_lookahead_tokens, "Extra slots per step")
      ->check(CLI::NonNegativeNumber)
      ->group(sched);
  cmd->add_option("--step-time", o.step_time,
                  "fixed:MS or roofline[:overhead_ms=..,mfu=..,mbu=..] (docs/step-time-model.md)")
      ->capture_default_str()
      ->group(sched);

  const char* run = "Execution and output";
  cmd->add_option("--jobs,-j", o.jobs, "Configs replayed in parallel (threads)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str()
      ->group(run);
  cmd->add_option("--shard", o.shard, "Run only configs with index % N == I (I/N, e.g. 0/4)")
      ->group(run);
  cmd->add_option("--csv", o.csv_path, "Write the per-config CSV here ('-' = stdout)")->group(run);
  cmd->add_flag("--quiet,-q", o.quiet, "Do not print the table")->group(run);
  cmd->add_option("--merge", o.merge, "Join shard CSVs (written by --csv) instead of sweeping")
      ->expected(1, -1)
      ->group(run);
  cmd->add_option("-o,--output", o.output, "Merged CSV path for --merge (default stdout)")
      ->group(run);

  cmd->callback([opts] { run_sweep_command(*opts); });
}

}  // namespace kvsim::cli
