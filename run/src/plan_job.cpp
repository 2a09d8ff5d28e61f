#include "kvsim/run/plan_job.h"

namespace kvsim::run {

Plan run_plan(const PlanJobOptions& o) {
  PlanInputs in = resolve_plan_inputs(o.plan);
  in.concurrency = o.concurrency;
  in.max_num_batched_tokens = o.max_num_batched_tokens;
  in.max_num_seqs = o.max_num_seqs;
  in.async_scheduling = o.async_scheduling;
  return compute_plan(in);
}

}  // namespace kvsim::run
