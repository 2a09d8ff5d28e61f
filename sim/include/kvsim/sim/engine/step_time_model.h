// Step-time models: how long one engine step takes on the simulated GPU.
//
// The replay clock advances by StepTimeModel::step_time_ns(work) after every step that schedules
// at least one token (docs/scheduler.md §Clock: a step that schedules nothing costs no time). The
// scheduler describes the step as a StepWork aggregate (no per-sequence storage, no allocation);
// models turn it into seconds:
//   * FixedStepTime    (`--step-time fixed:MS`): every non-empty step takes MS milliseconds.
//   * RooflineStepTime (`--step-time roofline[:k=v,...]`, the default): time = max(compute, memory)
//     + overhead, from the model shape and a GPU's peak FLOP/s and HBM bandwidth.
//   * PhysicsStepTime  (`--step-time physics:FILE`, physics_step_time.h): roofline terms times
//     fitted coefficients plus overheads, and per-request host costs.
//   * ProfileStepTime  (`--step-time profile:DIR`, profile_step_time.h): measured per-layer
//     operator and all-reduce tables (Vidur's layout) plus attention from a model.
// Formulas, default constants and their limits: docs/step-time-model.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kvsim/core/model_presets.h"
#include "kvsim/core/planner.h"

namespace kvsim {

// The longest one step may take: one hour. `fixed:MS` and the roofline's overhead_ms are bounded
// by it, and step_time_ns() refuses a longer estimate, so the replay clock (int64 ns) cannot be
// pushed past its range by one step and a run needs > 10^6 steps of the maximum to overflow it
// (which the replay then reports as an error).
inline constexpr double kMaxStepSeconds = 3600.0;

// What one step computes, summed over its scheduled sequences.
//
// Fill it with add_sequence() once per scheduled sequence (O(1), no allocation); clear() between
// steps. "context" is the sequence's num_computed_tokens before the step (tokens already in the KV
// cache that the new tokens attend to), "new" its num_scheduled_tokens this step.
// Invariant: every field is the exact sum of its per-sequence terms; all fields >= 0.
struct StepWork {
  int32_t num_seqs = 0;            // scheduled sequences
  int32_t num_prefill_seqs = 0;    // of which still in prefill (incl. recompute after preemption)
  int64_t num_prefill_tokens = 0;  // tokens scheduled for prefill sequences
  int64_t num_decode_tokens = 0;   // tokens scheduled for decoding sequences
  int64_t sum_context_tokens = 0;  // sum(context): KV tokens read from the cache
  int64_t sum_context_x_new = 0;   // sum(context * new): attention pairs against cached KV
  int64_t sum_new_squared = 0;     // sum(new^2): causal pairs among the new tokens (x 1/2)
  // The same two sums over prefill sequences only (decode parts: the totals minus these), for
  // models that cost prefill and decode attention apart (PhysicsStepTime).
  int64_t prefill_context_x_new = 0;
  int64_t prefill_new_squared = 0;

  void add_sequence(int64_t context_tokens, int64_t new_tokens, bool is_prefill) noexcept {
    ++num_seqs;
    if (is_prefill) {
      ++num_prefill_seqs;
      num_prefill_tokens += new_tokens;
      prefill_context_x_new += context_tokens * new_tokens;
      prefill_new_squared += new_tokens * new_tokens;
    } else {
      num_decode_tokens += new_tokens;
    }
    sum_context_tokens += context_tokens;
    sum_context_x_new += context_tokens * new_tokens;
    sum_new_squared += new_tokens * new_tokens;
  }
  void clear() noexcept { *this = StepWork{}; }
  int64_t num_tokens() const noexcept { return num_prefill_tokens + num_decode_tokens; }
  bool empty() const noexcept { return num_tokens() == 0; }
};

// Host-side costs a client sees on top of the engine clock, per request (seconds): added to the
// reported TTFT / end-to-end latency, never to the engine's schedule (a constant delay of every
// arrival shifts the whole schedule and changes no decision). Zero for fixed and roofline.
struct RequestOverheads {
  double queueing_s = 0.0;          // arrival -> in the engine's queue (API, tokenization)
  double per_output_token_s = 0.0;  // per generated token (detokenization, streaming)
  double completion_s = 0.0;        // once, after the last token
  bool any() const noexcept {
    return queueing_s != 0.0 || per_output_token_s != 0.0 || completion_s != 0.0;
  }
};

// A step's time and where it came from (seconds). For the fixed model compute = memory = 0.
struct StepTimeBreakdown {
  double compute_s = 0.0;   // FLOPs / (peak FLOP/s * mfu)
  double memory_s = 0.0;    // bytes / (HBM bandwidth * mbu)
  double overhead_s = 0.0;  // fixed per-step cost (scheduling, launch, sampling)
  double comm_s = 0.0;      // tensor-parallel all-reduces (in total_s)
  // Host time of the step (scheduling, input preparation) that async scheduling overlaps with
  // the previous batch's GPU time; part of total_s (see step_time_ns).
  double cpu_s = 0.0;
  double total_s = 0.0;  // max(compute, memory) + overhead + comm + cpu; 0 for an empty step
  bool compute_bound() const noexcept { return compute_s > memory_s; }
};

// Interface. Implementations are immutable after construction, so one instance may be shared by
// concurrent replays (kvsim sweep --jobs) without locking.
class StepTimeModel {
 public:
  virtual ~StepTimeModel() = default;
  // The estimate for one step; an empty step (no tokens) is all zeros.
  virtual StepTimeBreakdown estimate(const StepWork& work) const = 0;
  // One line naming the model and its parameters, e.g. for reports and JSON.
  virtual std::string describe() const = 0;
  // Per-request host costs (see RequestOverheads); none unless a model declares them.
  virtual RequestOverheads request_overheads() const { return {}; }
  // Whether (and on what) the clock was calibrated, with its measured error where known: one
  // line for the report and JSON, e.g. "uncalibrated: ..." for the roofline.
  virtual std::string calibration() const = 0;
  // estimate(work).total_s in integer nanoseconds (rounded to nearest), the replay clock's unit.
  // With `overlap_cpu` (async scheduling: the host prepares step k+1 while the GPU runs step k)
  // the step takes max(GPU part, cpu_s) instead of their sum.
  // Throws std::runtime_error when the estimate is not finite or exceeds kMaxStepSeconds (a huge
  // batch on a tiny mfu/mbu); such a step is a configuration error, not something to clamp.
  int64_t step_time_ns(const StepWork& work, bool overlap_cpu = false) const;
  // step_time_ns() of every non-empty step, either mode, for a model whose steps all take the
  // same time; nullopt otherwise (the replay then asks step_time_ns() per step).
  virtual std::optional<int64_t> constant_step_ns() const { return std::nullopt; }
};

// `fixed:MS`: each non-empty step takes exactly `ms` milliseconds (0 < ms <= 3.6e6, one hour).
class FixedStepTime final : public StepTimeModel {
 public:
  explicit FixedStepTime(double ms);
  StepTimeBreakdown estimate(const StepWork& work) const override;
  std::string describe() const override;
  std::string calibration() const override;
  double milliseconds() const noexcept { return ms_; }
  std::optional<int64_t> constant_step_ns() const override;

 private:
  double ms_;
};

// The model shape the roofline needs, for the whole (unsharded) model.
// MoE: weights read per step = dense part + routed experts actually hit, assuming uniform
// independent routing: X * (1 - (1 - k/E)^T) for T tokens, X = routed_expert_weight_bytes.
struct RooflineModelShape {
  std::string name;                 // for describe()
  double active_params = 0;         // parameters a token passes through (MoE: active experts)
  double weight_bytes = 0;          // all weight bytes (dense part + every routed expert)
  int32_t num_layers = 0;           // attention layers
  int32_t num_attention_heads = 0;  // query heads
  int32_t head_dim = 0;             // query/key head dim used by attention FLOPs
  double kv_bytes_per_token_per_rank = 0;  // kappa on one TP rank (planner's arithmetic, incl.
                                           // KV-head replication when n_kv < tp, and MLA)
  double routed_expert_weight_bytes = 0;   // bytes of all routed experts (0 for dense models)
  int32_t num_experts = 0;                 // routed experts E (0 = dense)
  int32_t num_experts_per_tok = 0;         // experts per token k
  int64_t hidden_size = 0;                 // all-reduced activations per token (0: not modelled)
  // LM head: vocab x hidden parameters, and the embedding-table parameters counted in
  // active_params that no token multiplies through (the lookup table; with untied embeddings
  // also the LM head, which only sampled sequences run). 0: not known (lm_head=1 then adds none).
  double lm_head_params = 0;
  double embedding_params = 0;
};

// The GPU the roofline runs on (one device; tensor parallel uses tp of them).
struct RooflineGpu {
  std::string name;
  double peak_flops = 0;       // dense bf16 FLOP/s
  double hbm_bytes_per_s = 0;  // nominal HBM bandwidth
  // GPU-to-GPU link (NVLink, xGMI, PCIe) of one GPU, bytes/s in each direction, and a small
  // all-reduce's latency; 0 = unknown, and then tensor-parallel all-reduces are not modelled
  // (describe() says so).
  double interconnect_bytes_per_s = 0;
  double interconnect_latency_s = 0;
};

// Tunables of the roofline; defaults documented (and justified) in docs/step-time-model.md.
struct RooflineParams {
  double mfu = 0.5;          // achievable fraction of peak FLOP/s (model FLOPs utilisation)
  double mbu = 0.8;          // achievable fraction of peak HBM bandwidth
  double overhead_ms = 1.0;  // fixed per-step cost
  int32_t tensor_parallel_size = 1;
  // Of the per-step cost, the host part async scheduling hides behind the GPU (added on top of
  // overhead_ms; 0 = none).
  double cpu_ms = 0.0;
  // Pure-decode steps run as CUDA graphs captured for batch sizes 1, 2, 4, 8, 16, 24, ..., 512:
  // the linear layers compute the padded batch (vLLM's default capture sizes).
  bool cuda_graph_padding = false;
  // Per-request host costs a client sees (RequestOverheads): before the engine, per output token.
  double queue_ms = 0.0;
  double token_ms = 0.0;
  // Tensor-parallel all-reduces over the card's link (allreduce=1). Off by default: on the
  // public H100 runs (docs/latency-validation.md) the link's bandwidth and NCCL latency made TP 2
  // predictions worse, not better (vLLM's custom all-reduce inside CUDA graphs is cheaper).
  bool allreduce = false;
  double allreduce_us = -1;  // one small all-reduce's latency; < 0: the card's preset
  // Terms added for the fitted per-card defaults (roofline v1; all off in v0):
  // LM head on the sampled sequences only (lm_head=1): the per-token linear FLOPs leave out the
  // embedding table(s) and each scheduled sequence adds 2 x vocab x hidden FLOPs.
  bool lm_head = false;
  // Per scheduled sequence per step (sampling, input preparation, per-request bookkeeping), us.
  double seq_us = 0.0;
  // Latency of one ring step of an all-reduce, us: an all-reduce costs 2 (tp - 1) of them
  // (replaces allreduce_us when >= 0).
  double allreduce_hop_us = -1;
  // Where these constants come from when they are a card's fitted defaults (the report's clock
  // line); "" = uncalibrated (today's v0 constants).
  std::string fitted;
};

// Per-card roofline defaults fitted on public measurements (roofline_card_defaults.cpp):
// a `--step-time roofline` on such a card starts from them; `roofline:v0` keeps the historical
// constants (mfu 0.5, mbu 0.8, overhead 1 ms, no v1 terms) on every card.
struct RooflineCardDefaults {
  std::string_view gpu;        // preset name (e.g. "h100-80g")
  double peak_flops = 0;       // the preset's numbers: a --gpu-spec with another peak or
  double hbm_bytes_per_s = 0;  // bandwidth under the same name does not match
  RooflineParams params;       // tensor_parallel_size is set by the caller
};
// The fitted defaults for `gpu`, or nullptr when the card has no data (v0, "uncalibrated").
const RooflineCardDefaults* roofline_card_defaults(const RooflineGpu& gpu);

// time = max(compute, memory) + overhead + comm + cpu, per GPU of a tensor-parallel group:
//   compute = (2 * P_active * T' + 4 * L * n_heads * d_h * sum(context*new + new^2/2)) / tp
//             / (peak_flops * mfu)
//             (lm_head=1: 2 * (P_active - P_embed) * T' + 2 * V * d * B in place of 2 P_active T')
//   overhead = overhead_ms + seq_us * B          (B = scheduled sequences)
//   memory  = (W_read(T) / tp + kappa_rank * (sum(context) + T)) / (hbm * mbu)
//   comm    = with allreduce=1, tp > 1 and a known link, 2 L ring all-reduces of T x hidden x 2
//             bytes: each 2 (tp-1)/tp x bytes / link (one direction) + a small one's latency
// W_read(T) = W for dense models (see RooflineModelShape for MoE). T = tokens scheduled in the
// step; T' = T, or the CUDA graph size a pure-decode batch is padded to (cuda_graph_padding).
class RooflineStepTime final : public StepTimeModel {
 public:
  // Throws std::invalid_argument when a shape/GPU number is not positive or a parameter is out of
  // range (mfu, mbu in [0.001, 1]; 0 <= overhead_ms <= 3.6e6 (one hour); tp >= 1).
  RooflineStepTime(RooflineModelShape model, RooflineGpu gpu, RooflineParams params = {});
  StepTimeBreakdown estimate(const StepWork& work) const override;
  std::string describe() const override;
  std::string calibration() const override;
  RequestOverheads request_overheads() const override;

  // Work counts, for tests and docs.
  double flops(const StepWork& work) const noexcept;            // per GPU
  double bytes_moved(const StepWork& work) const noexcept;      // per GPU
  double weight_bytes_read(int64_t num_tokens) const noexcept;  // whole model, all ranks
  double comm_seconds(const StepWork& work) const noexcept;     // the all-reduces
  // vLLM's default CUDA graph capture size for a decode batch of `tokens` (itself above 512).
  static int64_t cuda_graph_size(int64_t tokens) noexcept;
  const RooflineParams& params() const noexcept { return params_; }

 private:
  RooflineModelShape model_;
  RooflineGpu gpu_;
  RooflineParams params_;
};

// Parses a --step-time value: `fixed:MS` or `roofline` optionally followed by
// `:[v0,]key=value,...` (keys: RooflineParams). The roofline uses `model`, `gpu` and `tp`; it
// starts from the card's fitted defaults (roofline_card_defaults) unless the card has none or the
// list starts with `v0` (the historical constants, byte for byte today's outputs); keys override.
// Throws std::invalid_argument naming the spec and the bad part, e.g.
//   --step-time 'roofline:mfu=2': mfu must be in (0, 1], got 2
std::unique_ptr<StepTimeModel> parse_step_time_spec(std::string_view spec,
                                                    const RooflineModelShape& model,
                                                    const RooflineGpu& gpu, int32_t tp);

// The roofline inputs from the planner's model and card presets (core/model_presets.h).
//   weights: weight_bytes_total if > 0 (e.g. the planner's resolved, quantized weights for the
//            whole model), else num_parameters x bytes of the model dtype;
//   kappa per rank: the planner's page_size_bytes(block_size 1) x layers for kv_cache_dtype
//            ("auto" = model dtype), with vLLM's KV-head split/replication over tp ranks;
//   MoE: routed expert bytes = (total - active) / (E - k) * E parameters' worth.
// Throws std::invalid_argument when the model has no parameter count or the card no peak numbers.
RooflineModelShape roofline_shape(const ModelSpec& model, int32_t tp,
                                  std::string_view kv_cache_dtype = "auto",
                                  double weight_bytes_total = 0);
RooflineGpu roofline_gpu(const GpuSpec& gpu);

// parse_step_time_spec with the shape and card taken from presets (see roofline_shape). The
// model/card are only validated when the spec is a roofline, so fixed:MS works for any model.
std::unique_ptr<StepTimeModel> parse_step_time_spec(std::string_view spec, const ModelSpec& model,
                                                    const GpuSpec& gpu, int32_t tp,
                                                    std::string_view kv_cache_dtype = "auto",
                                                    double weight_bytes_total = 0);

// The same from a resolved plan (what `kvsim replay` and `kvsim sweep` use): the plan's KV dtype,
// its (possibly quantized) per-rank weights x tp, and its tensor-parallel size.
std::unique_ptr<StepTimeModel> make_step_time_model(std::string_view spec, const PlanInputs& inputs,
                                                    const Plan& plan);

}  // namespace kvsim
