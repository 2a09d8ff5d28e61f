// kvsim size's outputs: the JSON report (also the shard format --merge reads back), the CSV and
// the ranked text table. Every writer takes results already in report order
// (rank_size_results), so a merge that reads shards back and ranks them again writes
// byte-identical files to an unsharded run.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

#include "kvsim/sim/cluster/cluster_replay.h"
#include "kvsim/sim/sweep/size.h"
#include "kvsim/sim/sweep/sweep.h"

namespace kvsim {

// What the whole search was (identical in every shard of one search).
struct SizeReportContext {
  std::string trace;  // path as given
  int64_t requests = 0;
  std::string model;
  SloSpec slo;
  std::string router;  // --router name
  int32_t max_replicas = 0;
  int64_t num_candidates = 0;  // the whole candidate grid, not only this shard's
  uint64_t size_id = 0;        // fingerprint of everything that defines the results
};

// The JSON document: the context's fields, "feasible" (count), and "candidates" in the given
// order, each with the keys listed in docs/size.md (gpu, tp, kv_cache_dtype, block_size,
// max_num_seqs, replicas, cost_per_hour, feasible, reason, ttft_p99_s, tpot_p99_s,
// mean_running_per_replica, formula_max_concurrency, replay_command, trials, ...). Latencies of
// candidates that never ran are null. Ends with a newline.
std::string size_json(const SizeReportContext& ctx, std::span<const SizeResult> results);

// One CSV row per result in the given order (rank = position + 1), under size_csv_header().
std::string size_csv_header();
std::string size_csv(std::span<const SizeResult> results);

// The ranked table `kvsim size` prints: feasible candidates, then the infeasible ones with their
// reason.
std::string format_size_table(const SizeReportContext& ctx, std::span<const SizeResult> results);

// POSIX shell quoting of one argument: as it is when made only of characters no shell treats
// specially, else in single quotes.
std::string shell_quote(const std::string& s);

// The `kvsim replay` command line that reproduces a searched result (SizeResult::replay_command):
// `prefix` (the trace and the flags shared by every candidate), then the candidate's card, TP,
// KV dtype and, where it sets them, block size and max_num_seqs, the replica count and `router`.
std::string size_replay_command(const std::string& prefix, const std::string& router,
                                const SizeResult& r);

// Reads shard JSONs (written by size_json; contents with names for messages) back: every shard
// must agree on the context (size_id, num_candidates, trace, model, SLO, router, max_replicas),
// no candidate index may appear twice, and together they must cover 0 .. num_candidates - 1;
// no candidate may contradict its own arithmetic, its report or the grid (size_merge_checks.h).
// Returns the context and the results ranked (rank_size_results). Throws std::invalid_argument
// naming the file (and the line for malformed JSON, the candidate for a bad field).
struct SizeMerge {
  SizeReportContext context;
  std::vector<SizeResult> results;
};
SizeMerge merge_size_reports(std::span<const NamedText> shards);

}  // namespace kvsim
