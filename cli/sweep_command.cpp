// `kvsim sweep TRACE`: replay one trace over a Cartesian grid of configurations; CSV + table.
// `kvsim sweep --merge a.csv b.csv ... -o all.csv`: join shard CSVs. See docs/sweep.md.
#include <cstdio>
#include <functional>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "commands.h"
#include "grid_flags.h"
#include "interrupt.h"
#include "kvsim/run/sweep_job.h"
#include "kvsim/sim/report/report.h"
#include "kvsim/sim/sweep/sweep.h"
#include "kvsim/sim/traces/trace.h"
#include "output_files.h"
#include "plan_flags.h"
#include "plot_output.h"
#include "run_fingerprint.h"
#include "scheduler_flags.h"
#include "trace_flags.h"
#include "validators.h"

namespace kvsim::cli {
namespace {

struct SweepOptions {
  std::string trace_path;
  run::SweepJobOptions job;  // the trace settings are job.trace
  // Output.
  std::string csv_path;
  std::string plot_path;  // --plot: tools/plot_sweep.py (plot_output.h)
  bool quiet = false;
  std::vector<std::string> merge;
  std::string output;
};

// Flags that do not change the results (and so stay out of the sweep fingerprint), and the only
// ones --merge accepts besides -o.
bool is_sweep_execution_flag(const std::string& name) {
  return is_execution_flag(name, {"--csv", "--output", "--plot"});
}

// Everything that defines the results of a sweep, canonically: each result-affecting flag as
// given (name=values), and the requests actually read (arrival, lengths, priority, prefix ids),
// so shards read from differently named copies of one trace still match.
uint64_t sweep_fingerprint(const CLI::App& cmd, const Trace& trace) {
  return run_fingerprint("", cmd, trace, is_sweep_execution_flag);
}

// --plot: tools/plot_sweep.py on the CSV (a temporary file: --csv may be stdout or absent).
void draw_sweep_plot(OutputFiles& outputs, const std::string& plot_path,
                     const std::function<void(std::ostream&)>& write_csv) {
  PlotInputs inputs;
  draw_plot(outputs, plot_path, "plot_sweep.py", {inputs.add(write_csv)});
}

void run_merge(const CLI::App& cmd, const SweepOptions& o) {
  check_merge_flags(cmd, o.trace_path, "CSV", "sweep", is_sweep_execution_flag,
                    "the shard CSVs, -o/--output and --plot");
  for (const char* flag : {"--jobs", "--shard", "--csv"}) {
    if (cmd.get_option(flag)->count() > 0) {
      throw std::invalid_argument(fmt::format("--merge does not take {}", flag));
    }
  }
  OutputFiles out;
  out.add("--output", o.output.empty() ? "-" : o.output);
  add_plot_output(out, o.plot_path);
  for (const std::string& path : o.merge) out.add_input("the --merge input", path);
  out.open_all();
  const std::vector<NamedText> shards = read_merge_inputs(o.merge);
  const std::string merged = merge_sweep_csvs(shards);
  out.stream("--output") << merged;
  out.finish("--output");
  if (out.requested("--plot")) {
    draw_sweep_plot(out, o.plot_path, [&merged](std::ostream& f) { f << merged; });
  }
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
  check_trace_options(cmd, o.job.trace);
  const run::SweepJob job = run::prepare_sweep(o.job);
  OutputFiles outputs;
  outputs.add("--csv", o.csv_path);
  add_plot_output(outputs, o.plot_path);
  outputs.add_input("the trace", o.trace_path);
  outputs.add_input("--config", o.job.plan.config_path);
  outputs.add_input("--gpu-spec", o.job.plan.gpu_spec_path);
  outputs.open_all();

  const Trace trace = read_cli_trace(o.trace_path, o.job.trace);
  fmt::print(stderr, "{}", format_bad_rows(trace, "kvsim sweep"));
  // A signal stops the sweep before its next grid point (interrupt.h); run_sweep rethrows the
  // runner's error with context, so the signal is rethrown as itself here.
  run::SweepOutcome out;
  try {
    out = run::run_sweep_job(job, trace, [] { throw_if_interrupted(); });
  } catch (...) {
    throw_if_interrupted();
    throw;
  }

  // A configuration in which nothing could run measured nothing: say so; if that is every
  // configuration of this process, the sweep is unusable for this trace (exit 2, rows kept).
  for (const SweepRow* r : out.all_rejected_rows()) {
    fmt::print(stderr, "kvsim sweep: warning: config {} ({}): all {} requests rejected\n",
               r->point.index, r->point.describe(), r->outcome.requests);
  }
  const auto write_csv = [&](std::ostream& f) {
    write_sweep_csv(f, out.rows, out.num_configs, sweep_fingerprint(cmd, trace));
  };
  if (outputs.requested("--csv")) {
    write_csv(outputs.stream("--csv"));
    outputs.finish("--csv");
  }
  if (outputs.requested("--plot")) draw_sweep_plot(outputs, o.plot_path, write_csv);
  outputs.commit_all();
  if (!o.quiet && o.csv_path != "-") {
    fmt::print("kvsim sweep: {} ({} requests), {} of {} configs{}, model {}, gpu {}\n", trace.path,
               trace.requests.size(), out.rows.size(), out.num_configs,
               o.job.shard.empty() ? "" : fmt::format(" (shard {})", o.job.shard),
               job.base.plan.model.name, job.base.plan.gpu.name);
    fmt::print("{}", format_sweep_table(out.rows));
    fmt::print(
        "pad% = measured mean padding / used KV; pad%exp, exp/seq = analytic expectation "
        "(docs/sweep.md); conc = vLLM max concurrency\n");
  }
  if (out.every_config_rejected_all()) {
    std::fflush(stdout);
    fmt::print(stderr, "kvsim: error: {}\n", out.every_config_rejected_all_message());
    set_exit_code(kExitBadInput);
  }
}

}  // namespace

void register_sweep_command(CLI::App& app) {
  const auto made = add_grid_command<SweepOptions>(
      app, {"sweep",
            "Replay one trace over a grid of block sizes, pool sizes, KV dtypes and batch limits",
            "Context length (default: the model's max_position_embeddings; a model without one "
            "uses 1 + the trace's longest input + output)"});
  CLI::App* cmd = made.first;
  const std::shared_ptr<SweepOptions> opts = made.second;
  SweepOptions& o = *opts;
  run::SweepJobOptions& j = o.job;

  const char* grid = "Sweep grid (comma-separated lists)";
  add_int32_list_option(cmd, "--block-sizes", "block_sizes",
                        "Block sizes, e.g. 1,8,16,32,64,128,256", j.axes.block_sizes)
      ->group(grid);
  add_list_option(cmd, "--gpu-memory-utilizations", "Memory utilizations, e.g. 0.8,0.9,0.92",
                  [&j](const std::string& s) {
                    for (double u : parse_double_list("--gpu-memory-utilizations", s)) {
                      j.axes.gpu_memory_utilizations.push_back(u);
                    }
                  })
      ->group(grid);
  add_list_option(cmd, "--num-gpu-blocks", "Pool sizes in blocks (instead of utilizations)",
                  [&j](const std::string& s) {
                    for (int64_t n : parse_int_list("--num-gpu-blocks", s)) {
                      j.axes.num_gpu_blocks.push_back(n);
                    }
                  })
      ->group(grid);
  add_kv_cache_dtype_list_option(cmd, "--kv-cache-dtypes", "kv_cache_dtypes",
                                 "KV dtypes, e.g. bfloat16,fp8", j.axes.kv_cache_dtypes)
      ->group(grid);
  add_int32_list_option(cmd, "--max-num-seqs", "max_num_seqs",
                        "max_num_seqs values (default: vLLM's for the card)", j.axes.max_num_seqs)
      ->group(grid);
  add_int32_list_option(cmd, "--max-num-batched-tokens", "max_num_batched_tokens",
                        "Token budgets per step (default: vLLM's for the card)",
                        j.axes.max_num_batched_tokens)
      ->group(grid);

  add_scheduler_options(cmd, j.sched);

  const char* run =
      add_parallel_options(cmd, j.jobs, "Configs replayed in parallel (threads)", j.shard,
                           "Run only configs with index % N == I (I/N, e.g. 0/4)");
  cmd->add_option("--csv", o.csv_path, "Write the per-config CSV here ('-' = stdout)")->group(run);
  cmd->add_option("--plot", o.plot_path,
                  "Draw padding and concurrency against block size here, .png/.svg/.pdf "
                  "(tools/plot_sweep.py, needs matplotlib; also with --merge)")
      ->group(run);
  cmd->add_flag("--quiet,-q", o.quiet, "Do not print the table")->group(run);
  cmd->add_option(
         "--merge", o.merge,
         "Join shard CSVs (written by --csv) instead of sweeping; takes only -o and --plot "
         "besides")
      ->expected(1, -1)
      ->group(run);
  cmd->add_option("-o,--output", o.output, "Merged CSV path for --merge (default stdout)")
      ->group(run);

  cmd->callback([opts, cmd] { run_sweep_command(*cmd, *opts); });
}

}  // namespace kvsim::cli
