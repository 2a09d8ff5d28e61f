// size: `kvsim size` (cli/size_command.cpp run_size_command) minus printing, sharding and
// --merge. The same candidate expansion, planning, replica search, ranking and JSON/table writers
// (sim/sweep/size*.h), run on a worker thread without the GIL and stoppable by Ctrl-C before the
// next replay.
//
// What differs from the CLI, because it depends on the CLI's command line: the replay_command
// prefix ("kvsim replay TRACE <shared flags>") is built by the Python layer from its keyword
// arguments, in the CLI's flag order, and passed in; the JSON's size_id (a fingerprint of the
// command line, used only by --merge) is left 0 and dropped by the Python layer.
#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "interruptible.h"
#include "kvsim/run/cluster_options.h"
#include "kvsim/run/trace_input.h"
#include "kvsim/sim/cluster/cluster_replay.h"
#include "kvsim/sim/engine/replay_setup.h"
#include "kvsim/sim/sweep/size.h"
#include "kvsim/sim/sweep/size_replay.h"
#include "kvsim/sim/sweep/size_report.h"
#include "options.h"
#include "trace_binding.h"

namespace nb = nanobind;

namespace kvsim::python {
namespace {

std::vector<int32_t> int32_axis(const char* flag, const std::vector<int64_t>& v) {
  std::vector<int32_t> out;
  for (int64_t x : v) {
    if (x > std::numeric_limits<int32_t>::max() || x < std::numeric_limits<int32_t>::min()) {
      throw std::invalid_argument(fmt::format("{}: {} is too large", flag, x));
    }
    out.push_back(static_cast<int32_t>(x));
  }
  return out;
}

// Returns (JSON report text, ranked table text). The Python layer has checked that a model and
// both required SLOs are given.
nb::tuple size(const TraceHandle& handle, nb::dict plan_kwargs, nb::dict sched_kwargs,
               std::optional<int32_t> max_num_batched_tokens, nb::dict cluster_kwargs,
               const std::vector<std::string>& gpus, const std::vector<int64_t>& tp,
               const std::vector<std::string>& kv_cache_dtypes,
               const std::vector<int64_t>& block_sizes, const std::vector<int64_t>& max_num_seqs,
               int32_t max_replicas, const std::vector<std::string>& gpu_prices, bool early_stop,
               int32_t jobs, const std::string& replay_prefix) {
  // The CLI's order of checks (run_size_command): prices, --max-replicas, router/SLO, grid.
  PriceTable prices = default_gpu_prices();
  for (const std::string& p : gpu_prices) apply_gpu_price(prices, p);
  if (max_replicas < 1 || max_replicas > kMaxClusterReplicas) {
    throw std::invalid_argument(
        fmt::format("--max-replicas {}: must be in [1, {}]", max_replicas, kMaxClusterReplicas));
  }
  const run::ClusterOptions cluster_opts = cluster_options_from(cluster_kwargs);
  const ClusterConfig cluster = run::to_cluster_config(cluster_opts);
  SizeAxes axes;
  axes.gpus = gpus;
  axes.tensor_parallel_sizes = int32_axis("--tp", tp);
  axes.kv_cache_dtypes = kv_cache_dtypes;
  axes.block_sizes = int32_axis("--block-sizes", block_sizes);
  axes.max_num_seqs = int32_axis("--max-num-seqs", max_num_seqs);
  const std::vector<SizeCandidate> candidates = expand_size_candidates(axes);

  const Trace& trace = *handle.trace;
  run::require_requests(trace, handle.options);
  const run::SchedulerOptions sched = scheduler_options_from(sched_kwargs);
  SizeBase base;
  base.plan = run::resolve_plan_inputs(plan_options_from(plan_kwargs));
  resolve_max_model_len(base.plan, trace);
  run::apply(sched, base.settings);
  base.settings.max_num_batched_tokens = max_num_batched_tokens;
  base.step_time = sched.step_time;
  base.cluster = cluster;
  base.early_stop = early_stop;

  std::atomic<bool> stop{false};
  // A stop request ends the search before its next replay, as the CLI's signal handler does.
  const SizeRunner runner = [&base, &trace, &stop](const SizeCandidate& c) {
    if (stop.load()) throw Cancelled();
    CandidateSetup setup = prepare_size_candidate(base, trace, c);
    if (setup.run) {
      setup.run = [run = std::move(setup.run), &stop](int32_t replicas) {
        if (stop.load()) throw Cancelled();
        return run(replicas);
      };
    }
    return setup;
  };
  SizeSearchOptions search;
  search.max_replicas = max_replicas;
  search.jobs = jobs;
  std::vector<SizeResult> results =
      run_interruptible([&] { return run_size(candidates, runner, prices, search); }, stop);
  rank_size_results(results);
  for (SizeResult& r : results) {
    if (!r.trials.empty())
      r.replay_command = size_replay_command(replay_prefix, cluster_opts.router, r);
  }

  SizeReportContext ctx;
  ctx.trace = trace.path;
  ctx.requests = static_cast<int64_t>(trace.requests.size());
  ctx.model = base.plan.model.name;
  ctx.slo = cluster.slo;
  ctx.router = std::string(to_string(cluster.router));
  ctx.max_replicas = max_replicas;
  ctx.num_candidates = static_cast<int64_t>(candidates.size());
  return nb::make_tuple(size_json(ctx, results), format_size_table(ctx, results));
}

}  // namespace

void register_size(nb::module_& m) {
  m.def("size", &size, nb::arg("trace"), nb::arg("plan_options"), nb::arg("scheduler_options"),
        nb::arg("max_num_batched_tokens").none(), nb::arg("cluster_options"), nb::arg("gpus"),
        nb::arg("tp"), nb::arg("kv_cache_dtypes"), nb::arg("block_sizes"), nb::arg("max_num_seqs"),
        nb::arg("max_replicas"), nb::arg("gpu_prices"), nb::arg("early_stop"), nb::arg("jobs"),
        nb::arg("replay_prefix"),
        "`kvsim size --json -`: (JSON report text, ranked table text). Runs without the GIL; "
        "Ctrl-C raises KeyboardInterrupt before the next replay starts.");
}

}  // namespace kvsim::python
