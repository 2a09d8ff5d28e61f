// `size`: for every candidate deployment (card x TP x KV dtype x block size x max_num_seqs) the
// fewest replicas that serve a trace within a latency SLO, ranked by cost (docs/size.md). Both
// front ends call this: the CLI writes the JSON/CSV/plot, prints the table, shows progress and
// merges shards; Python converts the report. Neither holds a rule of its own.
//
//   SizeJob job = prepare_size(options);            // every check that needs no file
//   SizeOutcome out = run_size_job(job, trace);     // plan, search, rank, replay commands
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kvsim/core/param.h"
#include "kvsim/run/cluster_options.h"
#include "kvsim/run/plan_options.h"
#include "kvsim/run/scheduler_options.h"
#include "kvsim/sim/cluster/cluster_replay.h"
#include "kvsim/sim/sweep/size.h"
#include "kvsim/sim/sweep/size_report.h"
#include "kvsim/sim/traces/trace.h"

namespace kvsim::run {

inline constexpr int32_t kDefaultMaxReplicas = 64;

// The settings a user gave, by parameter id (core/param.h: "model", "max_requests",
// "enable_prefix_caching", ...), each with its value as typed ("0.50", "7.6e9"), or "" to write
// the option structs' value (what Python passes: it has values, not text; on/off settings are
// always written from the structs). Ids of settings a replay_command does not carry are ignored.
using GivenSettings = std::map<std::string, std::string, std::less<>>;

// Everything `size` takes besides the trace.
struct SizeJobOptions {
  // Model and memory. The card, TP, KV dtype, block size and pool sizes are searched (axes), so
  // plan.gpu*, vram_gib, weights_gib, kv_cache_dtype, tensor_parallel_size, block_size,
  // num_gpu_blocks_override and kv_cache_memory_bytes are not read.
  PlanOptions plan;
  TraceReadOptions trace;  // how the trace was read: the replay commands repeat it
  SchedulerOptions sched;
  std::optional<int32_t> max_num_batched_tokens;
  SizeAxes axes;
  // Router and its knobs, admission control and the SLO (both p99 objectives required);
  // replicas and slo_stop_early are not read (the search sets them).
  ClusterOptions cluster;
  int32_t max_replicas = kDefaultMaxReplicas;
  std::vector<std::string> gpu_prices;  // "NAME=USD", over the built-in table
  bool early_stop = true;               // stop failing trials early (same verdicts)
  int32_t jobs = 1;                     // (card, TP) groups searched in parallel (threads)
  std::string shard;                    // "I/N": only groups with index % N == I; empty: all
  GivenSettings given;                  // for the replay commands and the trace-setting rules
  // How a result's reason names parameters ("SLO unreachable at --max-replicas 8" for the CLI,
  // "max_replicas=8" for Python): the calling front end's spelling.
  ParamSpelling reason_spelling = ParamSpelling::kCli;
};

// A checked search: the candidates, prices and cluster configuration.
struct SizeJob {
  SizeJobOptions options;
  ShardSpec shard;
  PriceTable prices;
  ClusterConfig cluster;
  std::vector<SizeCandidate> candidates;  // the whole grid (not only this shard's)

  // The candidates this shard searches.
  int64_t searched() const;
};

// Refuses a missing model or SLO objective, trace settings that would be ignored, a bad shard,
// price, max_replicas, router/admission/SLO value (as replay checks them) or candidate grid.
// Reads no file. Throws std::invalid_argument naming the parameter.
SizeJob prepare_size(const SizeJobOptions& options);

// Where a front end stops a search and shows its progress.
struct SizeHooks {
  // Called before each candidate and each replay; stops the search by throwing.
  std::function<void()> check_stop;
  // Called once the model is resolved, before the first replay.
  std::function<void()> on_search_start;
  // Called after each candidate of the shard (from worker threads: must be thread-safe).
  std::function<void()> on_candidate_done;
};

struct SizeOutcome {
  // The report's context; size_id is left 0 (the CLI's fingerprint of its command line, which
  // only --merge reads).
  SizeReportContext context;
  std::vector<SizeResult> results;  // ranked, each searched one with its replay_command
  int64_t replays = 0;              // trials run
  int64_t stopped_early = 0;        // of which stopped once their verdict was "fail"
  double wall_seconds = 0;          // the search's

  // No candidate meets the SLO (the CLI's exit status 3; known only for an unsharded search).
  bool none_feasible() const { return !any_feasible(results); }
  static bool any_feasible(const std::vector<SizeResult>& results);
};

// "no candidate meets the SLO".
inline constexpr const char* kNoFeasibleMessage = "no candidate meets the SLO";

// Refuses an empty trace, resolves the model (reading config.json) and max_model_len, refuses a
// KV dtype the model cannot use, then searches, ranks and writes each result's replay_command.
// `trace` was read with options.trace.
SizeOutcome run_size_job(const SizeJob& job, const Trace& trace, const SizeHooks& hooks = {});

// "kvsim replay TRACE <the given model/trace/scheduler/SLO/router settings>" in the CLI's
// spelling and order (each setting as typed when the text is given), before each candidate's
// own --gpu, --tensor-parallel-size, ... (size_replay_command): a command line to run.
std::string size_replay_command_prefix(const SizeJobOptions& options,
                                       const std::string& trace_path);

}  // namespace kvsim::run
