// size: `kvsim size` (run::prepare_size / run::run_size_job, as the CLI calls them) minus
// printing: the same checks, candidate expansion, planning, replica search, ranking, replay
// commands and JSON/table writers, run on a worker thread without the GIL and stoppable by
// Ctrl-C before the next replay. `shard` ("I/N", as --shard) and merge_size_reports (the CLI's
// --merge) are for kvsim.size(executor=...) (python/kvsim/_executors.py).
//
// The JSON's size_id (the CLI's fingerprint of its command line, read only by --merge) is left 0
// (so every shard of one Python search agrees on it) and dropped by the Python layer.
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "interruptible.h"
#include "kvsim/run/grid_values.h"
#include "kvsim/run/size_job.h"
#include "kvsim/sim/sweep/size_report.h"
#include "options.h"
#include "trace_binding.h"

namespace nb = nanobind;

namespace kvsim::python {
namespace {

// Returns (JSON report text, ranked table text). `given`: the ids of the keywords given (and of
// the trace's read_trace keywords), which each candidate's replay_command repeats.
nb::tuple size(const TraceHandle& handle, nb::dict plan_kwargs, nb::dict sched_kwargs,
               std::optional<int32_t> max_num_batched_tokens, nb::dict cluster_kwargs,
               const std::vector<std::string>& gpus, const std::vector<int64_t>& tp,
               const std::vector<std::string>& kv_cache_dtypes,
               const std::vector<int64_t>& block_sizes, const std::vector<int64_t>& max_num_seqs,
               int32_t max_replicas, const std::vector<std::string>& gpu_prices, bool early_stop,
               int32_t jobs, const std::vector<std::string>& given, const std::string& shard) {
  run::SizeJobOptions o;
  o.reason_spelling = ParamSpelling::kPython;
  o.plan = plan_options_from(plan_kwargs);
  o.trace = handle.options;
  o.sched = scheduler_options_from(sched_kwargs);
  o.max_num_batched_tokens = max_num_batched_tokens;
  o.cluster = cluster_options_from(cluster_kwargs);
  o.axes.gpus = gpus;
  o.axes.tensor_parallel_sizes = run::to_int32_values("tp", tp);
  o.axes.kv_cache_dtypes = kv_cache_dtypes;
  o.axes.block_sizes = run::to_int32_values("block_sizes", block_sizes);
  o.axes.max_num_seqs = run::to_int32_values("max_num_seqs", max_num_seqs);
  o.max_replicas = max_replicas;
  o.gpu_prices = gpu_prices;
  o.early_stop = early_stop;
  o.jobs = jobs;
  o.shard = shard;
  for (const std::string& id : given) o.given[id] = "";
  const run::SizeJob job = run::prepare_size(o);

  std::atomic<bool> stop{false};
  run::SizeHooks hooks;
  hooks.check_stop = [&stop] {
    if (stop.load()) throw Cancelled();
  };
  const run::SizeOutcome out =
      run_interruptible([&] { return run::run_size_job(job, *handle.trace, hooks); }, stop);
  return nb::make_tuple(size_json(out.context, out.results),
                        format_size_table(out.context, out.results));
}

// `kvsim size --merge`: the shard reports (name for messages, JSON text) joined and ranked as
// (JSON report text, ranked table text), byte-identical to an unsharded search's.
nb::tuple merge_size(const std::vector<std::pair<std::string, std::string>>& shards) {
  std::vector<NamedText> named;
  named.reserve(shards.size());
  for (const auto& [name, text] : shards) named.push_back({name, text});
  const SizeMerge m = merge_size_reports(named);
  return nb::make_tuple(size_json(m.context, m.results), format_size_table(m.context, m.results));
}

}  // namespace

void register_size(nb::module_& m) {
  m.def("size", &size, nb::arg("trace"), nb::arg("plan_options"), nb::arg("scheduler_options"),
        nb::arg("max_num_batched_tokens").none(), nb::arg("cluster_options"), nb::arg("gpus"),
        nb::arg("tp"), nb::arg("kv_cache_dtypes"), nb::arg("block_sizes"), nb::arg("max_num_seqs"),
        nb::arg("max_replicas"), nb::arg("gpu_prices"), nb::arg("early_stop"), nb::arg("jobs"),
        nb::arg("given"), nb::arg("shard") = "",
        "`kvsim size --json -` (with `shard`, `--shard I/N`): (JSON report text, ranked table "
        "text). Runs without the GIL; Ctrl-C raises KeyboardInterrupt before the next replay "
        "starts.");
  m.def("merge_size_reports", &merge_size, nb::arg("shards"),
        "`kvsim size --merge`: [(name, shard JSON text), ...] -> (JSON report text, ranked table "
        "text), as the unsharded search writes them. Raises ValueError naming the shard.");
}

}  // namespace kvsim::python
