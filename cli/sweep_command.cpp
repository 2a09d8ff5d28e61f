// `kvsim sweep TRACE`: replay one trace over a Cartesian grid of configurations; CSV + table.
// `kvsim sweep --merge a.csv b.csv ... -o all.csv`: join shard CSVs. See docs/sweep.md.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "commands.h"
#include "interrupt.h"
#include "kvsim/run/trace_input.h"
#include "kvsim/sim/report/report.h"
#include "kvsim/sim/sweep/sweep.h"
#include "kvsim/sim/traces/trace.h"
#include "kvsim/sim/traces/trace_line_reader.h"
#include "output_files.h"
#include "plan_flags.h"
#include "run_fingerprint.h"
#include "scheduler_flags.h"
#include "trace_flags.h"
#include "validators.h"

namespace kvsim::cli {
namespace {

struct SweepOptions {
  std::string trace_path;
  run::PlanOptions plan;
  TraceReadOptions trace;
  SweepAxes axes;
  run::SchedulerOptions sched;  // not swept
  // Execution and output.
  int32_t jobs = 1;
  std::string shard;
  std::string csv_path;
  bool quiet = false;
  std::vector<std::string> merge;
  std::string output;
};

// Flags that do not change the results (and so stay out of the sweep fingerprint), and the only
// ones --merge accepts besides -o.
bool is_execution_flag(const std::string& name) {
  return name == "--jobs" || name == "--shard" || name == "--csv" || name == "--quiet" ||
         name == "--merge" || name == "--output" || name == "--help";
}

// A shard CSV, under the default input limits (a --merge of /dev/zero stops with its name).
std::string read_file(const std::string& path) {
  InputLimits limits;
  limits.has_flags = false;
  return read_text_file(path, limits);
}

// Everything that defines the results of a sweep, canonically: each result-affecting flag as
// given (name=values), and the requests actually read (arrival, lengths, priority, prefix ids),
// so shards read from differently named copies of one trace still match.
uint64_t fingerprint(const CLI::App& cmd, const Trace& trace) {
  return run_fingerprint("", cmd, trace, is_execution_flag);
}

void run_merge(const CLI::App& cmd, const SweepOptions& o) {
  if (!o.trace_path.empty()) {
    throw std::invalid_argument("--merge takes CSV files, not a TRACE");
  }
  for (const CLI::Option* opt : cmd.get_options()) {
    if (opt->count() > 0 && !is_execution_flag(opt->get_name())) {
      throw std::invalid_argument(fmt::format(
          "--merge takes only the shard CSVs and -o/--output (got {}); the sweep flags were "
          "fixed when the shards ran",
          opt->get_name()));
    }
  }
  for (const char* flag : {"--jobs", "--shard", "--csv"}) {
    if (cmd.get_option(flag)->count() > 0) {
      throw std::invalid_argument(fmt::format("--merge does not take {}", flag));
    }
  }
  OutputFiles out;
  out.add("--output", o.output.empty() ? "-" : o.output);
  for (const std::string& path : o.merge) out.add_input("the --merge input", path);
  out.open_all();
  std::vector<NamedText> shards;
  for (const std::string& path : o.merge) shards.push_back({path, read_file(path)});
  const std::string merged = merge_sweep_csvs(shards);
  out.stream("--output") << merged;
  out.finish("--output");
  out.commit_all();
  if (!o.output.empty() && o.output != "-") {
    fmt::print(stderr, "kvsim sweep: merged {} files into {}\n", shards.size(), o.output);
  }
}

void run_sweep_command(const CLI::App& cmd, const SweepOptions& o) {
  if (!o.merge.empty()) return run_merge(cmd, o);
  if (o.trace_path.empty()) {
    throw std::invalid_argument("sweep: a TRACE file is required (or --merge CSV...)");
  }
  if (!o.output.empty()) throw std::invalid_argument("-o/--output is for --merge; use --csv");
  check_trace_options(cmd, o.trace);
  const ShardSpec shard = o.shard.empty() ? ShardSpec{} : parse_shard(o.shard);
  const std::vector<SweepPoint> points = expand_sweep(o.axes);
  OutputFiles outputs;
  outputs.add("--csv", o.csv_path);
  outputs.add_input("the trace", o.trace_path);
  outputs.add_input("--config", o.plan.config_path);
  outputs.add_input("--gpu-spec", o.plan.gpu_spec_path);
  outputs.open_all();

  SweepBase base;
  base.plan = run::resolve_plan_inputs(o.plan);
  for (const std::string& d : o.axes.kv_cache_dtypes) {
    run::check_kv_cache_dtype_for_model("kv_cache_dtypes", d, base.plan.model);
  }
  run::apply(o.sched, base.settings);
  base.step_time = o.sched.step_time;

  const Trace trace = read_cli_trace(o.trace_path, o.trace);
  fmt::print(stderr, "{}", format_bad_rows(trace, "kvsim sweep"));
  run::require_requests(trace, o.trace);
  const std::vector<SequenceLengths> lengths = trace_lengths(trace);
  throw_if_interrupted();
  // A signal stops the sweep before its next grid point (interrupt.h); run_sweep rethrows the
  // runner's error with context, so the signal is rethrown as itself here.
  const auto runner = [&base, &trace](const SweepPoint& p) {
    throw_if_interrupted();
    return replay_sweep_point(base, trace, p);
  };
  std::vector<SweepRow> rows;
  try {
    rows = run_sweep(points, runner, lengths, o.jobs, shard);
  } catch (...) {
    throw_if_interrupted();
    throw;
  }

  const auto num_configs = static_cast<int64_t>(points.size());
  // A configuration in which nothing could run measured nothing: say so; if that is every
  // configuration of this process, the sweep is unusable for this trace (exit 2, rows kept).
  int64_t dead = 0;
  for (const SweepRow& r : rows) {
    if (r.outcome.requests > 0 && r.outcome.rejected == r.outcome.requests) {
      ++dead;
      fmt::print(stderr, "kvsim sweep: warning: config {} ({}): all {} requests rejected\n",
                 r.point.index, r.point.describe(), r.outcome.requests);
    }
  }
  if (outputs.requested("--csv")) {
    write_sweep_csv(outputs.stream("--csv"), rows, num_configs, fingerprint(cmd, trace));
    outputs.finish("--csv");
  }
  outputs.commit_all();
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
  if (!rows.empty() && dead == static_cast<int64_t>(rows.size())) {
    std::fflush(stdout);
    fmt::print(stderr, "kvsim: error: every configuration rejected all {} requests\n",
               rows.front().outcome.requests);
    set_exit_code(kExitBadInput);
  }
}

template <typename T>
std::vector<T> narrow_list(const char* flag, const std::vector<int64_t>& v) {
  std::vector<T> out;
  for (int64_t x : v) {
    if (x > std::numeric_limits<T>::max()) {
      throw std::invalid_argument(fmt::format("{}: {} is too large", flag, x));
    }
    out.push_back(static_cast<T>(x));
  }
  return out;
}

template <typename T>
void append(std::vector<T>& to, const std::vector<T>& items) {
  to.insert(to.end(), items.begin(), items.end());
}

// One comma-separated list per occurrence; `parse` is called for each occurrence in order.
CLI::Option* list_option(CLI::App* cmd, const char* flag, const char* help,
                         std::function<void(const std::string&)> parse) {
  return cmd
      ->add_option_function<std::vector<std::string>>(
          flag,
          [parse](const std::vector<std::string>& values) {
            for (const std::string& v : values) parse(v);
          },
          help)
      ->allow_extra_args(false)
      ->type_name("LIST");
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
  cmd->get_option("--max-model-len")
      ->description(
          "Context length (default: the model's max_position_embeddings; a model without one "
          "uses 1 + the trace's longest input + output)");
  add_trace_options(cmd, o.trace);

  // Lists are split here, not by CLI11, so an empty item (",16", "16,,32") is an error. A flag
  // given twice appends (so the grid's duplicate check sees both).
  const char* grid = "Sweep grid (comma-separated lists)";
  list_option(cmd, "--block-sizes", "Block sizes, e.g. 1,8,16,32,64,128,256",
              [&o](const std::string& s) {
                append(o.axes.block_sizes,
                       narrow_list<int32_t>("--block-sizes", parse_int_list("--block-sizes", s)));
              })
      ->group(grid);
  list_option(cmd, "--gpu-memory-utilizations", "Memory utilizations, e.g. 0.8,0.9,0.92",
              [&o](const std::string& s) {
                append(o.axes.gpu_memory_utilizations,
                       parse_double_list("--gpu-memory-utilizations", s));
              })
      ->group(grid);
  list_option(cmd, "--num-gpu-blocks", "Pool sizes in blocks (instead of utilizations)",
              [&o](const std::string& s) {
                append(o.axes.num_gpu_blocks, parse_int_list("--num-gpu-blocks", s));
              })
      ->group(grid);
  list_option(cmd, "--kv-cache-dtypes", "KV dtypes, e.g. bfloat16,fp8", [&o](const std::string& s) {
    for (const std::string& d : split_list("--kv-cache-dtypes", s)) {
      run::check_kv_cache_dtype("kv_cache_dtypes", d);  // refused before any replay runs
      o.axes.kv_cache_dtypes.push_back(d);
    }
  })->group(grid);
  list_option(cmd, "--max-num-seqs", "max_num_seqs values (default: vLLM's for the card)",
              [&o](const std::string& s) {
                append(o.axes.max_num_seqs,
                       narrow_list<int32_t>("--max-num-seqs", parse_int_list("--max-num-seqs", s)));
              })
      ->group(grid);
  list_option(cmd, "--max-num-batched-tokens",
              "Token budgets per step (default: vLLM's for the card)",
              [&o](const std::string& s) {
                append(o.axes.max_num_batched_tokens,
                       narrow_list<int32_t>("--max-num-batched-tokens",
                                            parse_int_list("--max-num-batched-tokens", s)));
              })
      ->group(grid);

  add_scheduler_options(cmd, o.sched);

  const char* run = "Execution and output";
  cmd->add_option("--jobs,-j", o.jobs, "Configs replayed in parallel (threads)")
      ->check(positive())
      ->capture_default_str()
      ->group(run);
  cmd->add_option("--shard", o.shard, "Run only configs with index % N == I (I/N, e.g. 0/4)")
      ->group(run);
  cmd->add_option("--csv", o.csv_path, "Write the per-config CSV here ('-' = stdout)")->group(run);
  cmd->add_flag("--quiet,-q", o.quiet, "Do not print the table")->group(run);
  cmd->add_option("--merge", o.merge,
                  "Join shard CSVs (written by --csv) instead of sweeping; takes only -o besides")
      ->expected(1, -1)
      ->group(run);
  cmd->add_option("-o,--output", o.output, "Merged CSV path for --merge (default stdout)")
      ->group(run);

  cmd->callback([opts, cmd] { run_sweep_command(*cmd, *opts); });
}

}  // namespace kvsim::cli
