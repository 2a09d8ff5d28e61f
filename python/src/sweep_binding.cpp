// sweep: `kvsim sweep` (run::prepare_sweep / run::run_sweep_job, as the CLI calls them) minus
// printing: the CSV text, which the Python layer turns into a DataFrame. Runs on a worker thread
// without the GIL, stoppable by Ctrl-C before the next grid point. `shard` ("I/N", as --shard)
// and merge_sweep_csvs (the CLI's --merge) are for kvsim.sweep(executor=...)
// (python/kvsim/_executors.py).
#include <atomic>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "interruptible.h"
#include "kvsim/run/grid_values.h"
#include "kvsim/run/sweep_job.h"
#include "options.h"
#include "trace_binding.h"

namespace nb = nanobind;

namespace kvsim::python {
namespace {

std::string sweep(const TraceHandle& handle, nb::dict plan_kwargs, nb::dict sched_kwargs,
                  const std::vector<int64_t>& block_sizes,
                  const std::vector<double>& gpu_memory_utilizations,
                  const std::vector<int64_t>& num_gpu_blocks,
                  const std::vector<std::string>& kv_cache_dtypes,
                  const std::vector<int64_t>& max_num_seqs,
                  const std::vector<int64_t>& max_num_batched_tokens, int32_t jobs,
                  const std::string& shard) {
  run::SweepJobOptions o;
  o.axes.block_sizes = run::to_int32_values("block_sizes", block_sizes);
  o.axes.gpu_memory_utilizations = gpu_memory_utilizations;
  o.axes.num_gpu_blocks = num_gpu_blocks;
  o.axes.kv_cache_dtypes = kv_cache_dtypes;
  o.axes.max_num_seqs = run::to_int32_values("max_num_seqs", max_num_seqs);
  o.axes.max_num_batched_tokens =
      run::to_int32_values("max_num_batched_tokens", max_num_batched_tokens);
  o.plan = plan_options_from(plan_kwargs);
  o.trace = handle.options;
  o.sched = scheduler_options_from(sched_kwargs);
  o.jobs = jobs;
  o.shard = shard;
  const run::SweepJob job = run::prepare_sweep(o);

  std::atomic<bool> stop{false};
  const run::SweepOutcome out = run_interruptible(
      [&] {
        return run::run_sweep_job(job, *handle.trace, [&stop] {
          if (stop.load()) throw Cancelled();
        });
      },
      stop);
  std::ostringstream csv;
  write_sweep_csv(csv, out.rows, out.num_configs);
  return csv.str();
}

// `kvsim sweep --merge`: the shard CSVs (name for messages, CSV text) joined, byte-identical to an
// unsharded sweep's CSV.
std::string merge_sweep(const std::vector<std::pair<std::string, std::string>>& shards) {
  std::vector<NamedText> named;
  named.reserve(shards.size());
  for (const auto& [name, text] : shards) named.push_back({name, text});
  return merge_sweep_csvs(named);
}

}  // namespace

void register_sweep(nb::module_& m) {
  m.def("sweep", &sweep, nb::arg("trace"), nb::arg("plan_options"), nb::arg("scheduler_options"),
        nb::arg("block_sizes"), nb::arg("gpu_memory_utilizations"), nb::arg("num_gpu_blocks"),
        nb::arg("kv_cache_dtypes"), nb::arg("max_num_seqs"), nb::arg("max_num_batched_tokens"),
        nb::arg("jobs"), nb::arg("shard") = "",
        "`kvsim sweep --csv -` (with `shard`, `--shard I/N`): the CSV text. Runs without the "
        "GIL; Ctrl-C raises KeyboardInterrupt before the next grid point starts.");
  m.def("merge_sweep_csvs", &merge_sweep, nb::arg("shards"),
        "`kvsim sweep --merge`: [(name, shard CSV text), ...] -> the CSV the unsharded sweep "
        "writes. Raises ValueError naming the shard and line.");
}

}  // namespace kvsim::python
