#include "kvsim/run/sweep_job.h"

#include <fmt/core.h>

#include "kvsim/run/trace_input.h"

namespace kvsim::run {

SweepJob prepare_sweep(const SweepJobOptions& options) {
  SweepJob job;
  job.options = options;
  // Names first, as the CLI refuses them while parsing its flags.
  for (const std::string& d : options.axes.kv_cache_dtypes)
    check_kv_cache_dtype("kv_cache_dtypes", d);
  if (!options.shard.empty()) job.shard = parse_shard(options.shard);
  job.points = expand_sweep(options.axes);
  job.base.plan = resolve_plan_inputs(options.plan);
  for (const std::string& d : options.axes.kv_cache_dtypes) {
    check_kv_cache_dtype_for_model("kv_cache_dtypes", d, job.base.plan.model);
  }
  apply(options.sched, job.base.settings);
  job.base.step_time = options.sched.step_time;
  return job;
}

std::vector<const SweepRow*> SweepOutcome::all_rejected_rows() const {
  std::vector<const SweepRow*> out;
  for (const SweepRow& r : rows) {
    if (r.outcome.requests > 0 && r.outcome.rejected == r.outcome.requests) out.push_back(&r);
  }
  return out;
}

bool SweepOutcome::every_config_rejected_all() const {
  return !rows.empty() && all_rejected_rows().size() == rows.size();
}

std::string SweepOutcome::every_config_rejected_all_message() const {
  return fmt::format("every configuration rejected all {} requests",
                     rows.empty() ? 0 : rows.front().outcome.requests);
}

SweepOutcome run_sweep_job(const SweepJob& job, const Trace& trace,
                           const std::function<void()>& check_stop) {
  require_requests(trace, job.options.trace);
  const std::vector<SequenceLengths> lengths = trace_lengths(trace);
  if (check_stop) check_stop();
  const SweepRunner runner = [&job, &trace, &check_stop](const SweepPoint& p) {
    if (check_stop) check_stop();
    return replay_sweep_point(job.base, trace, p);
  };
  SweepOutcome out;
  out.rows = run_sweep(job.points, runner, lengths, job.options.jobs, job.shard);
  out.num_configs = static_cast<int64_t>(job.points.size());
  return out;
}

}  // namespace kvsim::run
