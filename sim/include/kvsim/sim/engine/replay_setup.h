// From a planned pool and the user's scheduler settings to a ReplayConfig: the one place that
// turns `vllm serve`-style settings into the scheduler's numbers, shared by `kvsim replay`,
// `kvsim sweep` (every grid point) and bench_replay, so the three cannot disagree.
#pragma once

#include <cstdint>
#include <optional>

#include "kvsim/core/planner.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/sched/scheduler.h"
#include "kvsim/sim/traces/trace.h"

namespace kvsim {

// vLLM's `vllm serve` defaults (spec 5.2, EngineArgs.get_batch_defaults): a card with >= 70 GiB
// that is not an A100 gets max_num_batched_tokens 8192 and max_num_seqs 1024, any other card 2048
// and 256; vLLM 0.33 gives cards of >= 160 GiB 16384 and 1024 first
// (vllm_default_max_num_batched_tokens); then max_num_seqs = min(max_num_seqs,
// max_num_batched_tokens).
struct BatchLimits {
  int32_t max_num_seqs = 0;
  int32_t max_num_batched_tokens = 0;
};
BatchLimits vllm_default_batch_limits(const GpuSpec& gpu, VllmVersion vllm_version);

// What the user chose, before the pool is known. Unset batch limits take vLLM's defaults for
// the card; with chunked prefill off an unset token budget becomes max(max_model_len, default)
// (vLLM's rule, so a full-length prompt fits one step).
struct ReplaySettings {
  // Policy knobs; block/pool/length/batch/swap-slot fields and async_scheduling are set by
  // make_replay_config.
  SchedulerConfig scheduler;
  // vLLM's --[no-]async-scheduling. Unset = vLLM's resolution of `async_scheduling=None`: on,
  // unless an incompatible option is set (here: SWAP preemption, which then runs sync). An
  // explicit true with SWAP is refused by make_replay_config.
  std::optional<bool> async_scheduling;
  std::optional<int32_t> max_num_batched_tokens;
  std::optional<int32_t> max_num_seqs;
  double swap_space_gib = 4.0;        // SWAP mode: host swap space (vLLM V0's --swap-space)
  double swap_bandwidth_gbps = 25.0;  // SWAP mode: host<->device, GB/s (PCIe 4.0 x16 effective)
  bool record_timeline = false;
  bool record_requests = false;
  bool check_invariants = false;
  bool steady_decode = true;  // ReplayConfig::steady_decode (speed only)
};

// Defaults (docs/scheduler.md §Clock): when no max_model_len is given, the model's
// max_position_embeddings, else (or when `model_is_default`: the model was not chosen by the
// user) 1 + the trace's longest input + output. Leaves an explicit max_model_len alone.
void resolve_max_model_len(PlanInputs& in, const Trace& trace, bool model_is_default = false);
void resolve_max_model_len(PlanInputs& in, const TraceStream& trace, bool model_is_default = false);

// compute_plan(in), refusing a pool that cannot run a replay: fewer than 2 blocks (block 0 is
// vLLM's null block) or block count / block size / max_model_len beyond int32 (the scheduler's
// types). Throws std::invalid_argument with the numbers.
Plan plan_replay_pool(const PlanInputs& in);

// The same, with the scheduler knobs a hybrid model's plan depends on taken from `settings`
// (vLLM reserves, per sliding-window group, W - 1 + the tokens in flight: batches in flight x
// max_num_batched_tokens): an explicit --max-num-batched-tokens / --max-num-seqs, and async
// scheduling as make_replay_config resolves it. A replay then reports the vLLM lines that
// `kvsim plan` prints for the same flags. Full-attention plans do not depend on them.
Plan plan_replay_pool(PlanInputs in, const ReplaySettings& settings);

// The ReplayConfig for `plan` (from plan_replay_pool) and `settings`: pool, block size and
// max_model_len from the plan; batch limits as ReplaySettings says; the scheduling mode
// (async unless settings say otherwise or SWAP preemption is chosen); SWAP mode's host slots
// (floor(swap_space_gib GiB / bytes_per_block)) and transfer cost. validate()s the scheduler
// config; throws std::invalid_argument naming the offending setting.
ReplayConfig make_replay_config(const Plan& plan, const GpuSpec& gpu,
                                const ReplaySettings& settings);

// The lesson's N_seq for this plan; with a pool override, the pool's own N * block_size / L.
int64_t formula_max_concurrency(const Plan& plan);

}  // namespace kvsim
