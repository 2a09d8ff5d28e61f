// EngineCore: the call order of vLLM 0.26's engine loop around one Scheduler
// (vllm/v1/engine/core.py). One step() is one call of
//   * EngineCore.step() in sync mode: schedule(), then update_from_output() of that batch;
//   * EngineCore.step_with_batch_queue() in async mode (batch_queue_size = 2):
//       if the scheduler has requests: schedule() and queue the batch; return without processing
//       if the queue holds fewer than 2 batches and (the batch scheduled a token or the
//       scheduler still has requests);
//       then (queue full, or nothing to schedule) process the OLDEST queued batch with
//       update_from_output().
//     In steady state each step schedules batch k+1 and then processes batch k.
// The caller adds arrivals before each step, as vLLM's busy loop drains its input queue between
// steps. Invariant: num_in_flight() == scheduler.num_pending_outputs() <= max_concurrent_batches.
#pragma once

#include <cstdint>
#include <functional>

#include "kvsim/sim/sched/scheduler.h"

namespace kvsim {

struct EngineStep {
  const SchedulerOutput* scheduled = nullptr;  // the batch schedule() produced in this step
  const SchedulerOutput* processed = nullptr;  // the batch update_from_output() applied
};

class EngineCore {
 public:
  explicit EngineCore(Scheduler& scheduler) : sched_(scheduler) {}

  // Called right after schedule(), before any update_from_output() of the same step: where vLLM
  // launches the batch (execute_model). Scheduler state seen here is the post-schedule state.
  using AfterSchedule = std::function<void(const SchedulerOutput&)>;

  // One engine-loop iteration (see above). Returns {nullptr, nullptr} when there is nothing to
  // schedule and nothing in flight.
  EngineStep step(const AfterSchedule& after_schedule = {});

  int64_t num_in_flight() const { return sched_.num_pending_outputs(); }
  // Anything left to schedule or process (vLLM: has_requests() or a non-empty batch queue).
  bool has_work() const { return sched_.has_requests() || num_in_flight() > 0; }

 private:
  Scheduler& sched_;
};

}  // namespace kvsim
