// `sweep`: one trace replayed over a Cartesian grid of configurations (docs/sweep.md). Both front
// ends call this: the CLI writes the CSV, prints the table and merges shards; Python converts the
// rows. Neither holds a rule of its own.
//
//   SweepJob job = prepare_sweep(options);          // shard, grid, model and card, scheduler
//   SweepOutcome out = run_sweep_job(job, trace);   // the replays, in grid order
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kvsim/run/plan_options.h"
#include "kvsim/run/scheduler_options.h"
#include "kvsim/sim/sweep/sweep.h"
#include "kvsim/sim/traces/trace.h"

namespace kvsim::run {

// Everything `sweep` takes besides the trace.
struct SweepJobOptions {
  PlanOptions plan;        // the base configuration; an axis given replaces its setting
  TraceReadOptions trace;  // how the trace was read (its window, for "no request left")
  SweepAxes axes;
  SchedulerOptions sched;  // not swept
  int32_t jobs = 1;        // configurations replayed in parallel (threads)
  std::string shard;       // "I/N": only the configurations with index % N == I; empty: all
};

// A checked sweep: the grid points and the base every point starts from.
struct SweepJob {
  SweepJobOptions options;
  ShardSpec shard;
  std::vector<SweepPoint> points;  // the whole grid (not only this shard's)
  SweepBase base;
};

// Parses the shard, expands the grid (a duplicate or non-positive value, both pool axes), resolves
// the model and card (reading config.json / gpu_spec), refuses a KV dtype the model cannot use
// and applies the scheduler settings. Throws std::invalid_argument naming the parameter.
SweepJob prepare_sweep(const SweepJobOptions& options);

struct SweepOutcome {
  std::vector<SweepRow> rows;  // this shard's configurations, in grid order
  int64_t num_configs = 0;     // the whole grid

  // The rows in which every request was rejected: those configurations measured nothing.
  std::vector<const SweepRow*> all_rejected_rows() const;
  // Every row rejected all its requests: the sweep is unusable for this trace.
  bool every_config_rejected_all() const;
  // "every configuration rejected all N requests".
  std::string every_config_rejected_all_message() const;
};

// Refuses an empty trace, then replays every point of the job's shard on `jobs` threads.
// `check_stop` (may be empty) is called before each configuration; it is where a front end stops
// the sweep (by throwing). A replay's error is rethrown with the configuration named (run_sweep).
SweepOutcome run_sweep_job(const SweepJob& job, const Trace& trace,
                           const std::function<void()>& check_stop = {});

}  // namespace kvsim::run
