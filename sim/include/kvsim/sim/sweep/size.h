// kvsim size: for every candidate deployment (card x TP x KV dtype x block size x max_num_seqs)
// the fewest replicas that serve a trace within a latency SLO, and what that costs per hour.
//
// Like sweep.h, the library does not know how a candidate is replayed: the caller passes a
// SizeRunner that plans one candidate (CandidateSetup) and hands back a ReplicaTrial, a function
// from a replica count to that replay's SLO verdict. The search below only calls the trial; the
// real one (size_replay.h) runs a cluster replay, tests pass deterministic fakes.
//
// Replica search (search_min_replicas): probe a first count (1, or a guess), gallop away from it
// (up by 1, 2, 4, ... while probes fail, capped at max_replicas; down by 1, 2, 4, ... while they
// pass) until a failing and a passing count bracket the answer, then bisect between them. From
// 1 that is N = 1, 2, 4, 8, ... then binary. Its result is always a count whose trial was
// actually run and met the SLO.
//
// Warm start: run_size searches the candidates of one (card, TP) group in candidate order on one
// thread, each starting from the previous candidate's answer (KV dtype, block size and
// max_num_seqs rarely move it by much): with a right guess a candidate costs one passing replay
// and one failing (early-stopped) one instead of about 2 log2(N). Failing probes stop early;
// passing ones run the whole trace, so the passing probes are what a search costs.
//
// Monotonicity assumption: the search finds the *minimum* only if "N replicas meet the SLO"
// implies "N + 1 replicas meet it". That holds for a deterministic router that spreads load
// (round-robin, least-outstanding, least-kv) on traffic that is not pathological, but can fail:
//   * seeded routers (random, power-of-two) draw a different assignment for each N, so a lucky
//     N may pass while N + 1 fails;
//   * prefix-affinity / kv-aware routing trades load balance for cache hits: adding a replica
//     moves hash-ring ranges and can split a hot prefix group, lowering the hit rate;
//   * admission control rejects requests (which never meet the SLO) depending on per-replica
//     queue lengths, which do not shrink uniformly with N;
//   * p99 over a finite trace is a single order statistic: near the threshold, one request's
//     latency decides, and it need not fall monotonically.
// When the assumption fails the search still returns a verified passing count, but a smaller
// passing count may exist below the last failing probe (tests/sim/sweep/test_size_search.cpp shows
// both cases). docs/size.md discusses when to trust the minimum.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvsim/core/param.h"
#include "kvsim/sim/sweep/sweep.h"

namespace kvsim {

// The searched values. gpus and tensor_parallel_sizes must be non-empty; an empty
// kv_cache_dtypes means {"auto"}; an empty block_sizes / max_num_seqs keeps the base setting
// (block size 16, vLLM's max_num_seqs for the card).
struct SizeAxes {
  std::vector<std::string> gpus;  // GPU preset names (core/model_presets.h)
  std::vector<int32_t> tensor_parallel_sizes;
  std::vector<std::string> kv_cache_dtypes;
  std::vector<int32_t> block_sizes;
  std::vector<int32_t> max_num_seqs;
};

// One candidate configuration. `index` is its position in candidate order (0-based, dense):
// gpu outermost, then TP, KV dtype, block size, max_num_seqs innermost. `group` numbers the
// (gpu, TP) pairs in the same order (0-based, dense; a group's indices are contiguous): the unit
// of warm starts, threads and shards.
struct SizeCandidate {
  int64_t index = 0;
  int64_t group = 0;
  std::string gpu;  // the preset's canonical (lower-case) name
  int32_t tensor_parallel_size = 1;
  std::string kv_cache_dtype = "auto";  // as given
  std::optional<int32_t> block_size;
  std::optional<int32_t> max_num_seqs;

  // "h100-80g tp=2 kv=fp8 bs=16 seqs=256" (unset fields left out), for messages.
  std::string describe() const;
};

// Throws std::invalid_argument naming the flag for an empty gpu or TP list, an unknown GPU (with
// the known names), a TP size outside [1, kMaxTensorParallelSize] or a non-positive block size /
// max_num_seqs, or a duplicate value on any axis.
std::vector<SizeCandidate> expand_size_candidates(const SizeAxes& axes);

// The outcome of replaying the trace on one candidate with `replicas` replicas.
struct SizeTrial {
  int32_t replicas = 0;
  bool meets_slo = false;      // p99 of every SLO metric within its threshold
  bool stopped_early = false;  // the replay stopped once its verdict was "fail" (partial p99s)
  double ttft_p99_s = 0;
  double tpot_p99_s = 0;
  double e2e_p99_s = 0;
  double slo_attainment = 0;            // share of all trace requests that met every threshold
  double mean_running_per_replica = 0;  // sequences running in one replica, mean over its steps
  int64_t finished = 0;
  int64_t rejected = 0;
};

// Runs one trial. Called with replicas in [1, max_replicas], never twice with the same count
// for one candidate.
using ReplicaTrial = std::function<SizeTrial(int32_t replicas)>;

struct ReplicaSearch {
  std::optional<int32_t> replicas;  // the smallest passing count found; nullopt: none passed
  std::vector<SizeTrial> trials;    // every trial, in the order run
  // The trial reported for the candidate: the passing one at `replicas`, else the last trial
  // run (at max_replicas).
  const SizeTrial& reported() const;
};

// The galloping-then-binary search described at the top, starting at `guess`. Throws
// std::invalid_argument for max_replicas < 1 or a guess outside [1, max_replicas], and what
// `trial` throws.
ReplicaSearch search_min_replicas(const ReplicaTrial& trial, int32_t max_replicas,
                                  int32_t guess = 1);

// What planning one candidate gave. When it fits, `run` replays it; the other fields are the
// configuration it resolved to (vLLM defaults filled in).
struct CandidateSetup {
  // Non-empty when no replay can run: "does not fit: ..." (the planner's numbers) or
  // "invalid: ..." (the planner refuses the combination, e.g. TP does not divide the heads).
  // Names parameters with core/param.h's markers; run_size spells it into SizeResult::reason.
  std::string infeasible_reason;
  bool does_not_fit = false;  // the reason is a memory shortfall, not an invalid combination
  int32_t block_size = 0;
  int32_t max_num_seqs = 0;
  int32_t max_num_batched_tokens = 0;
  std::string kv_cache_dtype;  // resolved (never "auto") when planned
  int64_t num_gpu_blocks = 0;
  int64_t formula_max_concurrency = 0;  // the lesson's N_seq per replica
  double vllm_max_concurrency = 0;
  ReplicaTrial run;
};
// Plans one candidate; must be safe to call from several threads at once (run_size uses `jobs`
// threads), and the returned `run` is only ever called from the thread that planned it.
using SizeRunner = std::function<CandidateSetup(const SizeCandidate&)>;

// ---- Prices ----

// Per-GPU-hour prices in USD, keyed by canonical GPU preset name.
using PriceTable = std::map<std::string, double, std::less<>>;

// The built-in table: one illustrative price for every GPU preset (size_prices.cpp says where
// they come from and when). tests check that every preset has one.
PriceTable default_gpu_prices();

// Applies one --gpu-price "NAME=USD" (NAME any case). Throws std::invalid_argument
// "--gpu-price 'TEXT': ..." for a missing '=', an unknown GPU (listing the known ones) or a
// price that is not a finite number > 0.
void apply_gpu_price(PriceTable& prices, std::string_view text);

// ---- The search over all candidates ----

enum class SizeVerdict : uint8_t {
  FEASIBLE,         // `replicas` replicas meet the SLO
  SLO_UNREACHABLE,  // not even max_replicas replicas meet it
  DOES_NOT_FIT,     // the model does not fit the card at this TP / dtype / block size
  INVALID,          // the planner refuses the combination
};
std::string_view to_string(SizeVerdict v);  // "feasible", "slo_unreachable", ...

// One candidate's answer. Invariant: verdict == FEASIBLE iff reason is empty; for FEASIBLE the
// reported trial met the SLO at `replicas`; for SLO_UNREACHABLE `replicas` == max_replicas and
// the trial is the one at max_replicas; for DOES_NOT_FIT / INVALID replicas == 0, no trials, the
// resolved configuration fields are zero / empty and the latencies are written as null.
struct SizeResult {
  SizeCandidate candidate;
  SizeVerdict verdict = SizeVerdict::INVALID;
  std::string reason;
  // Resolved configuration (CandidateSetup's fields).
  int32_t block_size = 0;
  int32_t max_num_seqs = 0;
  int32_t max_num_batched_tokens = 0;
  std::string kv_cache_dtype;
  int64_t num_gpu_blocks = 0;
  int64_t formula_max_concurrency = 0;
  double vllm_max_concurrency = 0;
  // Search outcome.
  int32_t replicas = 0;
  double price_per_gpu_hour = 0;
  double cost_per_hour = 0;  // replicas x TP x price (also at max_replicas when unreachable)
  SizeTrial reported;
  std::vector<SizeTrial> trials;
  // The `kvsim replay ... --replicas N --router R` line that reproduces `reported` (set by the
  // caller, which knows the command line; empty for DOES_NOT_FIT / INVALID).
  std::string replay_command;

  bool feasible() const { return verdict == SizeVerdict::FEASIBLE; }
  int64_t gpus() const { return int64_t{replicas} * candidate.tensor_parallel_size; }
};

struct SizeSearchOptions {
  int32_t max_replicas = 64;
  int32_t jobs = 1;
  ShardSpec shard;  // selects groups: group % count == index
  // Called after each candidate of the shard is searched (for a progress display); called from
  // the worker threads, so it must be thread-safe. Empty: nothing is called.
  std::function<void()> on_candidate_done;
  // How SizeResult::reason names parameters (it is result data, shown as it is): the front end
  // that shows the results ("--max-replicas 8" for the CLI, "max_replicas=8" for Python).
  ParamSpelling spelling = ParamSpelling::kCli;
};

// Plans and searches every candidate of the groups in `shard` with `jobs` threads (one group at
// a time per thread, its candidates in order, each warm-started from the previous feasible or
// unreachable answer of the group; the first from 1). Results come back in candidate order and
// depend neither on jobs nor on sharding (a group never spans shards). Every candidate's GPU
// must have a price. A runner error is rethrown as run_sweep does (lowest candidate index,
// "size candidate I (description): ...").
std::vector<SizeResult> run_size(std::span<const SizeCandidate> candidates,
                                 const SizeRunner& runner, const PriceTable& prices,
                                 const SizeSearchOptions& options);

// Sorts into report order: feasible by cost, then GPU count, TTFT p99, candidate index;
// then SLO_UNREACHABLE, DOES_NOT_FIT, INVALID, each by candidate index. A total order, so the
// result does not depend on the input order (shards merge to the unsharded order).
void rank_size_results(std::vector<SizeResult>& results);

}  // namespace kvsim
