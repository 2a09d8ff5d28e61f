// `kvsim size TRACE --model M --slo-ttft-p99 S --slo-tpot-p99 S --gpus ... --tp ...`: for every
// candidate deployment the fewest replicas that meet the SLO, ranked by cost (docs/size.md).
// `kvsim size --merge a.json b.json ... [--json F] [--csv F]`: join shard reports.
//
// Exit status: 0 when at least one candidate is feasible (and for every --shard run, whose
// verdict is only known after --merge), 2 for bad input or an error, 3 when the search ran but no
// candidate meets the SLO (the table and files are still written).
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cluster_flags.h"
#include "commands.h"
#include "grid_flags.h"
#include "interrupt.h"
#include "kvsim/run/size_job.h"
#include "kvsim/sim/report/report.h"
#include "kvsim/sim/sweep/size.h"
#include "kvsim/sim/sweep/size_report.h"
#include "kvsim/sim/traces/trace.h"
#include "output_files.h"
#include "plan_flags.h"
#include "plot_output.h"
#include "run_fingerprint.h"
#include "scheduler_flags.h"
#include "size_progress.h"
#include "trace_flags.h"
#include "validators.h"

namespace kvsim::cli {
namespace {

// Exit status when the search ran but found no feasible candidate.
constexpr int kExitNoFeasible = 3;

struct SizeOptions {
  std::string trace_path;
  run::SizeJobOptions job;  // the trace settings are job.trace
  // Output.
  std::vector<std::string> merge;
  std::string json_path;
  std::string csv_path;
  std::string plot_path;
  bool quiet = false;
  bool no_early_stop = false;
};

bool is_size_execution_flag(const std::string& name) {
  return is_execution_flag(name, {"--json", "--csv", "--plot"});
}

// Everything that defines the results, canonically: each result-affecting flag as given, and
// the requests actually read (so shards read from differently named copies of one trace match).
uint64_t size_fingerprint(const CLI::App& cmd, const Trace& trace) {
  return run_fingerprint("kvsim size 1\x1e", cmd, trace, is_size_execution_flag);
}

// Registers --json / --csv / --plot (one OutputFiles, so duplicates, inputs, atomic replacement
// and the no-folder-creation rule cover the plot too). A plot is an image file, never stdout.
void add_outputs(const SizeOptions& o, OutputFiles& outputs) {
  outputs.add("--json", o.json_path);
  outputs.add("--csv", o.csv_path);
  add_plot_output(outputs, o.plot_path);
}

// Writes --json / --csv / the table / --plot for ranked results.
void write_outputs(const SizeOptions& o, OutputFiles& outputs, const SizeReportContext& ctx,
                   const std::vector<SizeResult>& results) {
  const std::string json = size_json(ctx, results);
  if (outputs.requested("--json")) {
    outputs.stream("--json") << json;
    outputs.finish("--json");
  }
  if (outputs.requested("--csv")) {
    outputs.stream("--csv") << size_csv(results);
    outputs.finish("--csv");
  }
  if (outputs.requested("--plot")) {
    PlotInputs inputs;
    draw_plot(outputs, o.plot_path, "plot_size.py",
              {inputs.add([&json](std::ostream& f) { f << json; })});
  }
  outputs.commit_all();
  if (!o.quiet && !outputs.uses_stdout()) std::cout << format_size_table(ctx, results);
}

void set_verdict_exit_code(const std::vector<SizeResult>& results) {
  if (run::SizeOutcome::any_feasible(results)) return;
  std::fflush(stdout);
  fmt::print(stderr, "kvsim size: {} (exit status {})\n", run::kNoFeasibleMessage, kExitNoFeasible);
  set_exit_code(kExitNoFeasible);
}

void run_merge(const CLI::App& cmd, const SizeOptions& o) {
  check_merge_flags(
      cmd, o.trace_path, "JSON", "search",
      [](const std::string& name) {
        return is_size_execution_flag(name) && name != "--jobs" && name != "--shard";
      },
      "the shard JSONs, --json, --csv, --plot and --quiet");
  OutputFiles outputs;
  add_outputs(o, outputs);
  for (const std::string& path : o.merge) outputs.add_input("the --merge input", path);
  outputs.open_all();
  const SizeMerge m = merge_size_reports(read_merge_inputs(o.merge));
  write_outputs(o, outputs, m.context, m.results);
  set_verdict_exit_code(m.results);
}

void run_size_command(const CLI::App& cmd, SizeOptions& o) {
  if (!o.merge.empty()) return run_merge(cmd, o);
  if (o.trace_path.empty()) {
    throw std::invalid_argument("size: a TRACE file is required (or --merge JSON...)");
  }
  o.job.early_stop = !o.no_early_stop;
  o.job.given = given_settings(cmd);
  const run::SizeJob job = run::prepare_size(o.job);

  OutputFiles outputs;
  add_outputs(o, outputs);
  outputs.add_input("the trace", o.trace_path);
  outputs.add_input("--config", o.job.plan.config_path);
  outputs.open_all();

  const Trace trace = read_cli_trace(o.trace_path, o.job.trace);
  fmt::print(stderr, "{}", format_bad_rows(trace, "kvsim size"));

  // A large grid says how large it is and, on a terminal, how far along (size_progress.h); a
  // signal stops the search before its next replay (interrupt.h).
  std::optional<SizeProgress> progress;
  run::SizeHooks hooks;
  hooks.check_stop = [] { throw_if_interrupted(); };
  hooks.on_search_start = [&] {
    progress.emplace(job.searched(), static_cast<int64_t>(trace.requests.size()), o.job.jobs);
  };
  hooks.on_candidate_done = [&progress] { progress->candidate_done(); };
  run::SizeOutcome out;
  try {
    out = run::run_size_job(job, trace, hooks);
  } catch (...) {
    progress.reset();
    throw_if_interrupted();
    throw;
  }
  progress.reset();

  out.context.size_id = size_fingerprint(cmd, trace);
  write_outputs(o, outputs, out.context, out.results);
  fmt::print(stderr,
             "kvsim size: {} candidates{}, {} replays ({} stopped early) in {:.2f} s wall, {} "
             "jobs\n",
             out.results.size(), o.job.shard.empty() ? "" : fmt::format(" (shard {})", o.job.shard),
             out.replays, out.stopped_early, out.wall_seconds, o.job.jobs);
  if (o.job.shard.empty()) set_verdict_exit_code(out.results);
}

}  // namespace

void register_size_command(CLI::App& app) {
  const auto made = add_grid_command<SizeOptions>(
      app, {"size",
            "Fewest replicas of each card/TP/KV dtype that serve a trace within a latency SLO, "
            "by cost",
            "Context length (default: the model's max_position_embeddings)"});
  CLI::App* cmd = made.first;
  const std::shared_ptr<SizeOptions> opts = made.second;
  SizeOptions& o = *opts;
  run::SizeJobOptions& j = o.job;
  // The card, TP, KV dtype and block size are searched; per-card pool sizes make no sense here.
  for (const char* flag :
       {"--gpu", "--vram-gib", "--gpu-spec", "--weights-gib", "--kv-cache-dtype", "--tp",
        "--block-size", "--num-gpu-blocks-override", "--kv-cache-memory-bytes"}) {
    cmd->remove_option(cmd->get_option(flag));
  }
  add_scheduler_options(cmd, j.sched);
  cmd->add_option("--max-num-batched-tokens", j.max_num_batched_tokens,
                  "Token budget per step (default: vLLM's for the card)")
      ->check(positive())
      ->group("Scheduler");

  // --slo-ttft-p99 / --slo-tpot-p99 (required here) / --slo-e2e-p99 and --router with its knobs
  // and admission control: the flags of `kvsim replay`'s cluster mode (cli/cluster_flags.h).
  add_slo_options(*cmd, j.cluster);
  add_router_options(*cmd, j.cluster);

  const char* grid = "Candidates (comma-separated lists)";
  add_list_option(cmd, "--gpus", "GPU presets, e.g. l40s,h100-80g,h200-141g (required)",
                  [&j](const std::string& s) {
                    for (std::string& g : split_list("--gpus", s)) j.axes.gpus.push_back(g);
                  })
      ->group(grid);
  add_int32_list_option(cmd, "--tp", "tp", "Tensor-parallel sizes, e.g. 1,2,4,8 (required)",
                        j.axes.tensor_parallel_sizes)
      ->group(grid);
  add_kv_cache_dtype_list_option(cmd, "--kv-cache-dtype", "kv_cache_dtype",
                                 "KV cache dtypes, e.g. auto,fp8 (default auto)",
                                 j.axes.kv_cache_dtypes)
      ->group(grid);
  add_int32_list_option(cmd, "--block-sizes", "block_sizes", "Block sizes (default 16)",
                        j.axes.block_sizes)
      ->group(grid);
  add_int32_list_option(cmd, "--max-num-seqs", "max_num_seqs",
                        "max_num_seqs values (default: vLLM's for the card)", j.axes.max_num_seqs)
      ->group(grid);

  const char* search = "Search";
  cmd->add_option("--max-replicas", j.max_replicas, "Largest replica count tried per candidate")
      ->check(positive())
      ->capture_default_str()
      ->group(search);
  cmd->add_option("--gpu-price", j.gpu_prices,
                  "Price per GPU-hour, NAME=USD (repeatable; overrides the built-in table, "
                  "docs/size.md)")
      ->group(search);
  cmd->add_flag("--no-early-stop", o.no_early_stop,
                "Replay failing trials to the end (same verdicts, full p99s; slower)")
      ->group(search);

  const char* run =
      add_parallel_options(cmd, j.jobs, "Candidates searched in parallel (threads)", j.shard,
                           "Search only candidates with index % N == I (I/N)");
  cmd->add_option("--merge", o.merge, "Join shard JSONs (written by --json) instead of searching")
      ->expected(1, -1)
      ->group(run);
  cmd->add_option("--json", o.json_path, "Write the JSON report here ('-' = stdout)")->group(run);
  cmd->add_option("--csv", o.csv_path, "Write the CSV here ('-' = stdout)")->group(run);
  cmd->add_option("--plot", o.plot_path,
                  "Draw cost against SLO attainment (tools/plot_size.py, needs matplotlib)")
      ->group(run);
  cmd->add_flag("--quiet,-q", o.quiet, "Do not print the table")->group(run);

  cmd->callback([opts, cmd] { run_size_command(*cmd, *opts); });
}

}  // namespace kvsim::cli
