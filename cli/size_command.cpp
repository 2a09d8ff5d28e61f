// `kvsim size TRACE --model M --slo-ttft-p99 S --slo-tpot-p99 S --gpus ... --tp ...`: for every
// candidate deployment the fewest replicas that meet the SLO, ranked by cost (docs/size.md).
// `kvsim size --merge a.json b.json ... [--json F] [--csv F]`: join shard reports.
//
// Exit status: 0 when at least one candidate is feasible (and for every --shard run, whose
// verdict is only known after --merge), 2 for bad input or an error, 3 when the search ran but no
// candidate meets the SLO (the table and files are still written).
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cluster_flags.h"
#include "commands.h"
#include "interrupt.h"
#include "kvsim/run/trace_input.h"
#include "kvsim/sim/cluster/cluster_replay.h"
#include "kvsim/sim/report/report.h"
#include "kvsim/sim/sweep/size.h"
#include "kvsim/sim/sweep/size_replay.h"
#include "kvsim/sim/sweep/size_report.h"
#include "kvsim/sim/traces/trace.h"
#include "kvsim/sim/traces/trace_line_reader.h"
#include "output_files.h"
#include "plan_flags.h"
#include "run_fingerprint.h"
#include "scheduler_flags.h"
#include "size_progress.h"
#include "trace_flags.h"
#include "validators.h"

extern char** environ;

namespace kvsim::cli {
namespace {

// Exit status when the search ran but found no feasible candidate.
constexpr int kExitNoFeasible = 3;

struct SizeOptions {
  std::string trace_path;
  run::PlanOptions plan;
  TraceReadOptions trace;
  run::SchedulerOptions sched;
  std::optional<int32_t> max_num_batched_tokens;
  SizeAxes axes;
  run::ClusterOptions cluster;  // router, its knobs, admission control and the SLO (--replicas: no)
  int32_t max_replicas = 64;
  std::vector<std::string> gpu_prices;
  bool no_early_stop = false;
  // Execution and output.
  int32_t jobs = 1;
  std::string shard;
  std::vector<std::string> merge;
  std::string json_path;
  std::string csv_path;
  std::string plot_path;
  bool quiet = false;
};

// The flags of `kvsim size` that `kvsim replay` does not take, and --router, which every
// replay_command names explicitly at its end (the rest are passed through as given).
bool is_size_only_flag(const std::string& name) {
  for (const char* f : {"--gpus", "--tp", "--kv-cache-dtype", "--block-sizes", "--max-num-seqs",
                        "--router", "--max-replicas", "--gpu-price", "--no-early-stop", "--jobs",
                        "--shard", "--merge", "--json", "--csv", "--plot", "--quiet", "--help"}) {
    if (name == f) return true;
  }
  return false;
}

// Flags that do not change the results (kept out of the fingerprint); the only ones --merge
// takes.
bool is_execution_flag(const std::string& name) {
  return name == "--jobs" || name == "--shard" || name == "--json" || name == "--csv" ||
         name == "--plot" || name == "--quiet" || name == "--merge" || name == "--help";
}

// "kvsim replay TRACE <model/card/trace/scheduler/router/SLO flags as given> --gpu G
// --tensor-parallel-size T --kv-cache-dtype D [--block-size B] [--max-num-seqs S]" (the
// candidate's own values only where the candidate sets them, so a default resolves the same way).
std::string replay_command_prefix(const CLI::App& cmd, const SizeOptions& o) {
  std::string s = "kvsim replay " + shell_quote(o.trace_path);
  for (const CLI::Option* opt : cmd.get_options()) {
    const std::string name = opt->get_name();
    if (opt->count() == 0 || is_size_only_flag(name) || name == "TRACE") continue;
    if (opt->get_expected_max() == 0) {
      s += " " + name;  // a flag
      continue;
    }
    for (const std::string& r : opt->results()) s += " " + name + " " + shell_quote(r);
  }
  return s;
}

// Everything that defines the results, canonically: each result-affecting flag as given, and
// the requests actually read (so shards read from differently named copies of one trace match).
uint64_t fingerprint(const CLI::App& cmd, const Trace& trace) {
  return run_fingerprint("kvsim size 1\x1e", cmd, trace, is_execution_flag);
}

// tools/plot_size.py: next to this source file's directory (the tree kvsim was built from),
// unless KVSIM_TOOLS_DIR names another.
std::filesystem::path plot_script() {
  if (const char* dir = std::getenv("KVSIM_TOOLS_DIR"); dir != nullptr && *dir != '\0') {
    return std::filesystem::path(dir) / "plot_size.py";
  }
  return std::filesystem::path(__FILE__).parent_path().parent_path() / "tools" / "plot_size.py";
}

// The format matplotlib is told to write: the destination's extension (the temporary's name
// ends in ".kvsim-XXXXXX", so the script cannot infer it), png when there is none.
std::string plot_format(const std::string& destination) {
  std::string ext = std::filesystem::path(destination).extension().string();
  if (ext.size() <= 1) return "png";
  ext.erase(0, 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

// Runs `python3 tools/plot_size.py JSON -o OUT --format F` (no shell), OUT being the temporary
// OutputFiles made for --plot, so the plot is committed (or discarded) with the other outputs.
// The script's own chatter goes to stderr: stdout may carry --json - or --csv -. Throws naming
// --plot on failure.
void draw_plot(const std::string& json_text, const std::string& plot_path,
               const std::string& out_path) {
  const std::filesystem::path script = plot_script();
  if (!std::filesystem::exists(script)) {
    throw std::runtime_error(
        fmt::format("--plot: {} not found (set KVSIM_TOOLS_DIR to the kvsim source tree's tools/)",
                    script.string()));
  }
  std::string tmpl = (std::filesystem::temp_directory_path() / "kvsim-size-XXXXXX").string();
  const int fd = mkstemp(tmpl.data());
  if (fd < 0) throw std::runtime_error("--plot: cannot create a temporary file");
  close(fd);
  struct Remove {
    std::string path;
    int slot;
    ~Remove() {
      std::remove(path.c_str());
      unregister_temporary(slot);
    }
  } remove{tmpl, register_temporary(tmpl)};
  {
    std::ofstream f(tmpl, std::ios::binary);
    f << json_text;
    if (!f.flush()) throw std::runtime_error("--plot: cannot write a temporary file");
  }
  // KVSIM_PYTHON picks the interpreter (one with matplotlib, e.g. /usr/bin/python3).
  const char* py_env = std::getenv("KVSIM_PYTHON");
  const std::string python = py_env != nullptr && *py_env != '\0' ? py_env : "python3";
  std::vector<std::string> args = {python,     script.string(),       tmpl, "-o", out_path,
                                   "--format", plot_format(plot_path)};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  // kvsim ignores SIGPIPE/SIGXFSZ (interrupt.h); the script gets the defaults back.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGXFSZ);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, python.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (spawned != 0) {
    throw std::runtime_error(fmt::format("--plot: cannot run {} (set KVSIM_PYTHON)", python));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("--plot: waiting for the plot script failed");
  }
  throw_if_interrupted();  // a Ctrl-C reached the script too: report the signal, not its failure
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string how = WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                              : "killed by a signal";
    throw std::runtime_error(
        fmt::format("--plot {}: {} {} failed ({}; it needs matplotlib: set KVSIM_PYTHON)",
                    plot_path, python, script.string(), how));
  }
}

// Registers --json / --csv / --plot (one OutputFiles, so duplicates, inputs, atomic replacement
// and the no-folder-creation rule cover the plot too). A plot is an image file, never stdout.
void add_outputs(const SizeOptions& o, OutputFiles& outputs) {
  if (o.plot_path == "-") {
    throw std::invalid_argument("--plot -: a plot cannot go to stdout; name a .png or .svg file");
  }
  outputs.add("--json", o.json_path);
  outputs.add("--csv", o.csv_path);
  outputs.add("--plot", o.plot_path);
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
    draw_plot(json, o.plot_path, outputs.write_path("--plot"));
    outputs.finish("--plot");
  }
  outputs.commit_all();
  if (!o.quiet && !outputs.uses_stdout()) std::cout << format_size_table(ctx, results);
}

void set_verdict_exit_code(const std::vector<SizeResult>& results) {
  for (const SizeResult& r : results) {
    if (r.feasible()) return;
  }
  std::fflush(stdout);
  fmt::print(stderr, "kvsim size: no candidate meets the SLO (exit status {})\n", kExitNoFeasible);
  set_exit_code(kExitNoFeasible);
}

void run_merge(const CLI::App& cmd, const SizeOptions& o) {
  if (!o.trace_path.empty()) throw std::invalid_argument("--merge takes JSON files, not a TRACE");
  for (const CLI::Option* opt : cmd.get_options()) {
    const std::string name = opt->get_name();
    if (opt->count() > 0 && (!is_execution_flag(name) || name == "--jobs" || name == "--shard")) {
      throw std::invalid_argument(fmt::format(
          "--merge takes only the shard JSONs, --json, --csv, --plot and --quiet (got {}); the "
          "search flags were fixed when the shards ran",
          name));
    }
  }
  OutputFiles outputs;
  add_outputs(o, outputs);
  for (const std::string& path : o.merge) outputs.add_input("the --merge input", path);
  outputs.open_all();
  std::vector<NamedText> shards;
  InputLimits limits;
  limits.has_flags = false;
  for (const std::string& path : o.merge) shards.push_back({path, read_text_file(path, limits)});
  const SizeMerge m = merge_size_reports(shards);
  write_outputs(o, outputs, m.context, m.results);
  set_verdict_exit_code(m.results);
}

void run_size_command(const CLI::App& cmd, SizeOptions& o) {
  if (!o.merge.empty()) return run_merge(cmd, o);
  if (o.trace_path.empty()) {
    throw std::invalid_argument("size: a TRACE file is required (or --merge JSON...)");
  }
  if (!run::model_given(o.plan)) {
    throw std::invalid_argument(
        "size: a model is required (--model, --config, or --num-layers/--num-kv-heads/--head-dim)");
  }
  for (const auto& [flag, given] :
       {std::pair{"--slo-ttft-p99", o.cluster.slo_ttft_p99.has_value()},
        std::pair{"--slo-tpot-p99", o.cluster.slo_tpot_p99.has_value()}}) {
    if (!given) throw std::invalid_argument(fmt::format("size: {} is required", flag));
  }
  check_trace_options(cmd, o.trace);
  const ShardSpec shard = o.shard.empty() ? ShardSpec{} : parse_shard(o.shard);
  PriceTable prices = default_gpu_prices();
  for (const std::string& p : o.gpu_prices) apply_gpu_price(prices, p);
  if (o.max_replicas > kMaxClusterReplicas) {
    throw std::invalid_argument(
        fmt::format("--max-replicas {}: must be in [1, {}]", o.max_replicas, kMaxClusterReplicas));
  }
  // Router knobs, admission control and SLO checked as `kvsim replay` checks them.
  const ClusterConfig cluster = run::to_cluster_config(o.cluster);
  const std::vector<SizeCandidate> candidates = expand_size_candidates(o.axes);

  OutputFiles outputs;
  add_outputs(o, outputs);
  outputs.add_input("the trace", o.trace_path);
  outputs.add_input("--config", o.plan.config_path);
  outputs.open_all();

  const Trace trace = read_cli_trace(o.trace_path, o.trace);
  fmt::print(stderr, "{}", format_bad_rows(trace, "kvsim size"));
  run::require_requests(trace, o.trace);

  SizeBase base;
  base.plan = run::resolve_plan_inputs(o.plan);
  for (const std::string& d : o.axes.kv_cache_dtypes) {
    run::check_kv_cache_dtype_for_model("kv_cache_dtype", d, base.plan.model);
  }
  resolve_max_model_len(base.plan, trace);
  run::apply(o.sched, base.settings);
  base.settings.max_num_batched_tokens = o.max_num_batched_tokens;
  base.step_time = o.sched.step_time;
  base.cluster = cluster;
  base.early_stop = !o.no_early_stop;
  throw_if_interrupted();

  // A signal stops the search before its next replay (interrupt.h).
  const SizeRunner runner = [&base, &trace](const SizeCandidate& c) {
    throw_if_interrupted();
    CandidateSetup setup = prepare_size_candidate(base, trace, c);
    if (setup.run) {
      setup.run = [run = std::move(setup.run)](int32_t replicas) {
        throw_if_interrupted();
        return run(replicas);
      };
    }
    return setup;
  };
  SizeSearchOptions search;
  search.max_replicas = o.max_replicas;
  search.jobs = o.jobs;
  search.shard = shard;
  const auto start = std::chrono::steady_clock::now();
  std::vector<SizeResult> results;
  {
    // A large grid says how large it is and, on a terminal, how far along (size_progress.h).
    int64_t searched = 0;
    for (const SizeCandidate& c : candidates) searched += shard.contains(c.group) ? 1 : 0;
    SizeProgress progress(searched, static_cast<int64_t>(trace.requests.size()), o.jobs);
    search.on_candidate_done = [&progress] { progress.candidate_done(); };
    try {
      results = run_size(candidates, runner, prices, search);
    } catch (...) {
      throw_if_interrupted();
      throw;
    }
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  rank_size_results(results);
  const std::string prefix = replay_command_prefix(cmd, o);
  int64_t replays = 0;
  int64_t stopped = 0;
  for (SizeResult& r : results) {
    if (!r.trials.empty()) r.replay_command = size_replay_command(prefix, o.cluster.router, r);
    replays += static_cast<int64_t>(r.trials.size());
    for (const SizeTrial& t : r.trials) stopped += t.stopped_early ? 1 : 0;
  }

  SizeReportContext ctx;
  ctx.trace = o.trace_path;
  ctx.requests = static_cast<int64_t>(trace.requests.size());
  ctx.model = base.plan.model.name;
  ctx.slo = base.cluster.slo;
  ctx.router = std::string(to_string(cluster.router));
  ctx.max_replicas = o.max_replicas;
  ctx.num_candidates = static_cast<int64_t>(candidates.size());
  ctx.size_id = fingerprint(cmd, trace);
  write_outputs(o, outputs, ctx, results);
  fmt::print(stderr,
             "kvsim size: {} candidates{}, {} replays ({} stopped early) in {:.2f} s wall, {} "
             "jobs\n",
             results.size(), o.shard.empty() ? "" : fmt::format(" (shard {})", o.shard), replays,
             stopped, wall, o.jobs);
  if (o.shard.empty()) set_verdict_exit_code(results);
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

std::vector<int32_t> int32_list(const char* flag, const std::string& text) {
  std::vector<int32_t> out;
  for (int64_t x : parse_int_list(flag, text)) {
    if (x > std::numeric_limits<int32_t>::max()) {
      throw std::invalid_argument(fmt::format("{}: {} is too large", flag, x));
    }
    out.push_back(static_cast<int32_t>(x));
  }
  return out;
}

template <typename T>
void append(std::vector<T>& to, const std::vector<T>& items) {
  to.insert(to.end(), items.begin(), items.end());
}

}  // namespace

void register_size_command(CLI::App& app) {
  auto opts = std::make_shared<SizeOptions>();
  SizeOptions& o = *opts;
  CLI::App* cmd = app.add_subcommand(
      "size",
      "Fewest replicas of each card/TP/KV dtype that serve a trace within a latency SLO, by cost");
  cmd->add_option("TRACE", o.trace_path, "Trace file (any format kvsim replay reads)");
  add_model_card_options(cmd, o.plan);
  // The card, TP, KV dtype and block size are searched; per-card pool sizes make no sense here.
  for (const char* flag :
       {"--gpu", "--vram-gib", "--gpu-spec", "--weights-gib", "--kv-cache-dtype", "--tp",
        "--block-size", "--num-gpu-blocks-override", "--kv-cache-memory-bytes"}) {
    cmd->remove_option(cmd->get_option(flag));
  }
  cmd->get_option("--max-model-len")
      ->description("Context length (default: the model's max_position_embeddings)");
  add_trace_options(cmd, o.trace);
  add_scheduler_options(cmd, o.sched);
  cmd->add_option("--max-num-batched-tokens", o.max_num_batched_tokens,
                  "Token budget per step (default: vLLM's for the card)")
      ->check(positive())
      ->group("Scheduler");

  // --slo-ttft-p99 / --slo-tpot-p99 (required here) / --slo-e2e-p99 and --router with its knobs
  // and admission control: the flags of `kvsim replay`'s cluster mode (cli/cluster_options.h).
  add_slo_options(*cmd, o.cluster);
  add_router_options(*cmd, o.cluster);

  // Lists are split here, not by CLI11, so an empty item is an error; a flag given twice appends.
  const char* grid = "Candidates (comma-separated lists)";
  list_option(cmd, "--gpus", "GPU presets, e.g. l40s,h100-80g,h200-141g (required)",
              [&o](const std::string& s) { append(o.axes.gpus, split_list("--gpus", s)); })
      ->group(grid);
  list_option(
      cmd, "--tp", "Tensor-parallel sizes, e.g. 1,2,4,8 (required)",
      [&o](const std::string& s) { append(o.axes.tensor_parallel_sizes, int32_list("--tp", s)); })
      ->group(grid);
  list_option(cmd, "--kv-cache-dtype", "KV cache dtypes, e.g. auto,fp8 (default auto)",
              [&o](const std::string& s) {
                for (const std::string& d : split_list("--kv-cache-dtype", s)) {
                  run::check_kv_cache_dtype("kv_cache_dtype", d);  // a typo up front, as --gpus
                  o.axes.kv_cache_dtypes.push_back(d);
                }
              })
      ->group(grid);
  list_option(cmd, "--block-sizes", "Block sizes (default 16)", [&o](const std::string& s) {
    append(o.axes.block_sizes, int32_list("--block-sizes", s));
  })->group(grid);
  list_option(
      cmd, "--max-num-seqs", "max_num_seqs values (default: vLLM's for the card)",
      [&o](const std::string& s) { append(o.axes.max_num_seqs, int32_list("--max-num-seqs", s)); })
      ->group(grid);

  const char* search = "Search";
  cmd->add_option("--max-replicas", o.max_replicas, "Largest replica count tried per candidate")
      ->check(positive())
      ->capture_default_str()
      ->group(search);
  cmd->add_option("--gpu-price", o.gpu_prices,
                  "Price per GPU-hour, NAME=USD (repeatable; overrides the built-in table, "
                  "docs/size.md)")
      ->group(search);
  cmd->add_flag("--no-early-stop", o.no_early_stop,
                "Replay failing trials to the end (same verdicts, full p99s; slower)")
      ->group(search);

  const char* run = "Execution and output";
  cmd->add_option("--jobs,-j", o.jobs, "Candidates searched in parallel (threads)")
      ->check(positive())
      ->capture_default_str()
      ->group(run);
  cmd->add_option("--shard", o.shard, "Search only candidates with index % N == I (I/N)")
      ->group(run);
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
