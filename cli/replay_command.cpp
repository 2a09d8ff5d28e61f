// `kvsim replay TRACE`: replay a trace through the vLLM 0.26 scheduler/allocator clone and
// report observed concurrency against the capacity formula (docs/scheduler.md). The replay is the
// run room's (kvsim/run/replay_job.h); here: flags, files, progress bar, printing.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "cluster_flags.h"
#include "commands.h"
#include "interrupt.h"
#include "kvsim/run/parameters.h"
#include "kvsim/run/replay_job.h"
#include "kvsim/sim/report/cluster_report.h"
#include "kvsim/sim/report/report.h"
#include "kvsim/sim/traces/trace.h"
#include "kvsim/sim/traces/trace_stream.h"
#include "option_batch.h"
#include "output_files.h"
#include "plan_flags.h"
#include "plot_output.h"
#include "scheduler_flags.h"
#include "trace_flags.h"
#include "validators.h"

namespace kvsim::cli {
namespace {

struct ReplayCommandOptions {
  std::string trace_path;
  run::ReplayOptions job;
  run::ClusterOptions cluster;  // job.cluster when a cluster or SLO flag is given
  TraceReadOptions trace;
  std::string json_path;
  std::string timeline_path;
  std::string requests_path;
  std::string plot_path;      // --plot: tools/plot_replay.py or plot_cluster.py (plot_output.h)
  std::string metrics_path;   // --metrics: OpenMetrics text (docs/metrics.md)
  std::string vllm_log_path;  // --vllm-log: vLLM's periodic engine log lines
  bool no_progress = false;
};

// The --timeline / --requests CSV of a replay (the cluster CSVs when the rows carry a replica).
void write_timeline(std::ostream& f, const run::ReplayOutcome& out) {
  if (out.timeline_has_replica()) {
    write_cluster_timeline_csv(f, out.result().timeline, out.cluster->timeline_replica);
  } else {
    write_timeline_csv(f, out.result().timeline);
  }
}

void write_requests(std::ostream& f, const run::ReplayOutcome& out) {
  if (out.requests_have_cluster_columns()) {
    write_cluster_requests_csv(f, out.result().requests, out.cluster->request_replica,
                               out.cluster->admission_reason);
  } else {
    write_requests_csv(f, out.result().requests);
  }
}

// --plot: the summary, timeline and requests written for the script (temporary files: the
// user's own outputs may be stdout or absent), then tools/plot_replay.py, or plot_cluster.py for
// rows with a replica column (--replicas 2 or more).
void draw_replay_plot(OutputFiles& outputs, const std::string& plot_path,
                      const run::ReplayOutcome& out) {
  PlotInputs inputs;
  const std::string summary =
      inputs.add([&out](std::ostream& f) { f << out.summary_json().dump(2) << "\n"; });
  const std::string timeline = inputs.add([&out](std::ostream& f) { write_timeline(f, out); });
  const std::string requests = inputs.add([&out](std::ostream& f) { write_requests(f, out); });
  draw_plot(outputs, plot_path, out.timeline_has_replica() ? "plot_cluster.py" : "plot_replay.py",
            {"--summary", summary, "--timeline", timeline, "--requests", requests});
}

void run(const CLI::App& cmd, ReplayCommandOptions& o) {
  run::ReplayOptions& job = o.job;
  if (cluster_flags_given(cmd)) job.cluster = o.cluster;
  job.record_timeline = !o.timeline_path.empty();
  job.record_requests = !o.requests_path.empty();
  if (!o.plot_path.empty()) {
    job.record_timeline = job.record_requests = true;  // the figure's series and latency CDFs
  }
  if (!o.metrics_path.empty() || !o.vllm_log_path.empty()) {
    job.record_timeline = job.record_requests = true;  // both are sampled from the records
  }
  check_trace_options(cmd, o.trace);
  run::check_replay_options(job);
  OutputFiles outputs;
  outputs.add("--json", o.json_path);
  outputs.add("--timeline", o.timeline_path);
  outputs.add("--requests", o.requests_path);
  add_plot_output(outputs, o.plot_path);
  outputs.add("--metrics", o.metrics_path);
  outputs.add("--vllm-log", o.vllm_log_path);
  outputs.add_input("the trace", o.trace_path);
  outputs.add_input("--config", job.plan.config_path);
  outputs.add_input("--gpu-spec", job.plan.gpu_spec_path);
  outputs.refuse_inputs();
  // A plain replay streams the trace (memory follows the requests in flight, plus one record a
  // request where the records are kept); a pipe or FIFO cannot be read twice: read whole, once.
  std::optional<TraceStream> stream;
  if (run::replay_can_stream(job, o.trace_path)) {
    stream = TraceStream::open(o.trace_path, o.trace);
  }
  const Trace whole = stream ? Trace{} : read_cli_trace(o.trace_path, o.trace);
  const Trace& trace = stream ? stream->header() : whole;
  fmt::print(stderr, "{}", format_bad_rows(trace, "kvsim replay"));
  const run::ReplayJob prepared =
      run::prepare_replay(job, trace, o.trace, stream ? &*stream : nullptr);
  // Last check before the run: every output path can be written.
  outputs.open_all();

  // Always installed: it is where a SIGINT/SIGTERM stops the replay (interrupt.h).
  const bool draw = !o.no_progress && isatty(STDERR_FILENO) != 0;
  ProgressCallback progress = [draw](int64_t done, int64_t total, int64_t sim_ns) {
    throw_if_interrupted();
    if (draw) {
      const int width = 40;
      const int fill = total > 0 ? static_cast<int>(width * done / total) : width;
      fmt::print(stderr, "\r[{:<{}}] {}/{} requests, t={:.1f} s", std::string(fill, '#'), width,
                 done, total, static_cast<double>(sim_ns) * 1e-9);
      if (done == total) fmt::print(stderr, "\n");
      std::fflush(stderr);
    }
  };
  // A plain replay whose timeline has no other use than --timeline into a file streams the rows
  // to it as the steps are logged instead of holding them (issue 27: 350k rows on a whole Azure
  // replay); the bytes are the same. Only into a temporary file renamed at the end: a failed or
  // interrupted replay leaves nothing behind either way, while stdout or a FIFO would see part
  // of the rows. With a second core the rows are formatted and written there, while the replay
  // runs (TimelineCsvWriter::Mode::kBackground).
  // The records have no other use without a cluster (which merges its replicas' at the end) and
  // without the outputs drawn or sampled from them.
  const bool records_only_for_files =
      !job.cluster && o.plot_path.empty() && o.metrics_path.empty() && o.vllm_log_path.empty();
  const auto streams_into = [&outputs, records_only_for_files](const char* name) {
    return records_only_for_files && outputs.requested(name) && outputs.renamed_at_commit(name);
  };
  std::optional<TimelineCsvWriter> timeline_writer;
  if (job.record_timeline && streams_into("--timeline")) {
    timeline_writer.emplace(outputs.stream("--timeline"), std::thread::hardware_concurrency() > 1
                                                              ? TimelineCsvWriter::Mode::kBackground
                                                              : TimelineCsvWriter::Mode::kInline);
  }
  // The per-request rows likewise: each record is written once final, in trace order, instead of
  // one record per trace request held to the end.
  std::optional<RequestsCsvWriter> requests_writer;
  if (job.record_requests && streams_into("--requests")) {
    requests_writer.emplace(outputs.stream("--requests"));
  }
  const run::ReplayOutcome out =
      run::run_replay_job(prepared, progress, 0, timeline_writer ? &*timeline_writer : nullptr,
                          requests_writer ? &*requests_writer : nullptr);
  const ReplayResult& result = out.result();

  // The human report goes to stdout unless an output file already does.
  if (!outputs.uses_stdout()) std::cout << out.report() << std::flush;
  if (outputs.requested("--json")) {
    outputs.stream("--json") << out.summary_json().dump(2) << "\n";
    outputs.finish("--json");
  }
  if (outputs.requested("--timeline")) {
    if (timeline_writer) {
      timeline_writer->finish();
    } else {
      write_timeline(outputs.stream("--timeline"), out);
    }
    outputs.finish("--timeline");
  }
  if (outputs.requested("--requests")) {
    if (requests_writer) {
      requests_writer->finish();
    } else {
      write_requests(outputs.stream("--requests"), out);
    }
    outputs.finish("--requests");
  }
  if (outputs.requested("--metrics")) {
    out.write_metrics(outputs.stream("--metrics"));
    outputs.finish("--metrics");
  }
  if (outputs.requested("--vllm-log")) {
    out.write_vllm_log(outputs.stream("--vllm-log"));
    outputs.finish("--vllm-log");
  }
  fmt::print(stderr, "kvsim replay: {} requests, {} steps in {:.3f} s wall\n",
             result.summary.requests, result.summary.steps, result.summary.wall_seconds);
  // Every failure is decided before anything is renamed into place: a failed run leaves each
  // destination as it was (its temporaries go with `outputs`), whatever stdout showed.
  if (const std::string failure = out.verification_failure(); !failure.empty()) {
    throw std::runtime_error("KV backend verification failed: " + failure +
                             "; no output file was changed");
  }
  // A replay in which nothing could run measured nothing: the report stays printed, but the
  // configuration is unusable for this trace, so exit as for bad input.
  if (out.all_rejected()) {
    fmt::print(stderr, "kvsim: error: {}; no output file was changed\n",
               out.all_rejected_message());
    set_exit_code(kExitBadInput);
    return;
  }
  if (outputs.requested("--plot")) draw_replay_plot(outputs, o.plot_path, out);
  outputs.commit_all();
}

}  // namespace

void register_replay_command(CLI::App& app) {
  auto o = std::make_shared<ReplayCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "replay",
      "Replay a trace through vLLM 0.26's scheduler and KV allocator; report concurrency");
  cmd->add_option("trace", o->trace_path, "Trace file (Azure, Vidur, BurstGPT, Mooncake, ...)")
      ->required();
  // In batches of up to about twenty (option_batch.h: CLI11 compares each new option with every
  // earlier one: ~0.1 ms of a replay's start-up with the whole command in one).
  add_options_in_batch(*cmd, [&] { add_model_card_options(cmd, o->job.plan); });
  add_options_in_batch(*cmd, [&] { add_trace_options(cmd, o->trace); });
  add_options_in_batch(*cmd, [&] {
    cmd->add_option("--max-num-batched-tokens", o->job.max_num_batched_tokens,
                    "Token budget per step (default: vLLM's for the card)")
        ->check(positive())
        ->group("Scheduler");
    cmd->add_option("--max-num-seqs", o->job.max_num_seqs,
                    "Maximum running requests (default: vLLM's for the card)")
        ->check(positive())
        ->group("Scheduler");
    add_scheduler_options(cmd, o->job.sched);
  });
  add_options_in_batch(*cmd, [&] { add_cluster_options(*cmd, o->cluster); });
  add_options_in_batch(*cmd, [&] {
    cmd->add_option("--backend", o->job.backend, "KV storage: null | host | cuda")
        ->check(one_of(run::kBackendNames))
        ->capture_default_str();
    cmd->add_option("--backend-max-layers", o->job.backend_max_layers,
                    "Keep only this many layers in a host/cuda pool (0 = all)")
        ->check(non_negative());
    cmd->add_option("--preemption-mode", o->job.preemption_mode,
                    "recompute (vLLM v1's only mode, default) | swap (KV to host and back, as vLLM "
                    "V0)")
        ->check(one_of(run::kPreemptionModes));
    cmd->add_option("--swap-space-gib", o->job.swap_space_gib,
                    "Host swap space for --preemption-mode swap, GiB (default 4, vLLM V0's)");
    cmd->add_option("--swap-bandwidth-gbps", o->job.swap_bandwidth_gbps,
                    "Host<->device swap bandwidth, GB/s (default 25: PCIe 4.0 x16 effective)");
  });
  add_options_in_batch(*cmd, [&] {
    cmd->add_option("--json", o->json_path,
                    "Write the JSON summary to PATH ('-' = stdout instead of the report)");
    cmd->add_option("--timeline", o->timeline_path,
                    "Write one CSV row per step to PATH ('-' = stdout instead of the report)");
    cmd->add_option("--requests", o->requests_path,
                    "Write one CSV row per request to PATH ('-' = stdout instead of the report)");
    cmd->add_option("--metrics", o->metrics_path,
                    "Write the run as vLLM's Prometheus metrics, OpenMetrics text, to PATH ('-' = "
                    "stdout instead of the report; docs/metrics.md)");
    cmd->add_option("--metrics-interval", o->job.metrics_interval,
                    "Simulated seconds between two --metrics samples (a Prometheus scrape)")
        ->check(positive())
        ->capture_default_str();
    cmd->add_option("--metrics-start", o->job.metrics_start,
                    "Unix time (s) of simulated time 0 in --metrics and --vllm-log (default: the "
                    "trace's clock, Azure's first TIMESTAMP replayed; else 2025-01-01T00:00:00Z)")
        ->check(non_negative());
    cmd->add_option("--vllm-log", o->vllm_log_path,
                    "Write vLLM's periodic engine log lines (throughput, running, waiting, KV "
                    "usage) to PATH ('-' = stdout instead of the report)");
    cmd->add_option("--vllm-log-interval", o->job.vllm_log_interval,
                    "Simulated seconds between two --vllm-log lines (vLLM's "
                    "VLLM_LOG_STATS_INTERVAL)")
        ->check(positive())
        ->capture_default_str();
  });
  add_options_in_batch(*cmd, [&] {
    cmd->add_option("--plot", o->plot_path,
                    "Draw concurrency, KV usage and latency CDFs to PATH, .png/.svg/.pdf "
                    "(tools/plot_replay.py or plot_cluster.py; needs matplotlib)");
    cmd->add_flag("--no-progress", o->no_progress, "No progress bar on stderr");
    cmd->add_flag("--check-invariants", o->job.check_invariants,
                  "Check the allocator's invariants after every step (slow)");
    cmd->add_flag_callback(
        "--no-steady-decode", [o] { o->job.steady_decode = false; },
        "Run every step through the general scheduler path (speed only: outputs are "
        "identical; for checking and benchmarking)");
  });
  cmd->get_option("--max-model-len")
      ->description(
          "Context length (default: the model's max_position_embeddings with --model or "
          "--config; else 1 + the trace's longest input + output)");
  for (const char* flag : {"--num-layers", "--num-kv-heads", "--head-dim"}) {
    CLI::Option* opt = cmd->get_option(flag);
    std::string d = opt->get_description();
    if (const auto at = d.find(" (overrides the model)"); at != std::string::npos) d.erase(at);
    opt->description(fmt::format(
        "{} (overrides --model/--config, else the default {}; all three alone: a custom model)", d,
        run::kDefaultModel));
  }
  cmd->callback([o, cmd] { run(*cmd, *o); });
}

}  // namespace kvsim::cli
