// `--step-time profile:DIR[,all_reduce=FILE][,overhead_ms=X][,attn_mfu=Y][,attn_mbu=Z]`:
// measured per-layer operator times (Vidur's mlp.csv, read as published; profile_tables.h),
// measured tensor-parallel all-reduce times (all_reduce.csv), and attention from a model.
//
// DIR is a directory holding mlp.csv (or the mlp.csv file itself). The all-reduce table is
// `all_reduce=FILE`, else DIR/all_reduce.csv when it exists; it is needed only at TP > 1.
// Shipped tables: calibration/vidur/ (README there).
//
// Per step of T = P + D tokens, on one GPU of a tensor-parallel group of tp, L layers, hidden d,
// q heads h, head width d_h, kappa = KV bytes per token on one rank (all layers, the planner's
// arithmetic), F = peak FLOP/s, W = HBM bytes/s of the run's --gpu:
//   layers    = L * sum over kProfileLayerOps of median_op(T, tp)          (table, milliseconds)
//   all_reduce= 2 L * AR_tp(T d 2 bytes)  (one after attention, one after the MLP; 0 at tp 1)
//   attn_c    = 4 L (h/tp) d_h * sum(context*new + new^2/2) / (F * attn_mfu)
//   attn_kv   = kappa * (sum(context) + T) / (W * attn_mbu)   (read cached KV, write new KV)
//   step      = layers + all_reduce + attn_c + attn_kv + overhead_ms
// median_op and AR_tp interpolate linearly between profiled points and extrapolate beyond the
// last one (PiecewiseLinear). The breakdown reports layers + attn_c as compute, attn_kv as memory,
// all_reduce + overhead as overhead; total is their sum.
//
// Invariants, checked at construction (std::invalid_argument naming the table and both values):
// the table's n_head, n_kv_head, n_embd, n_expanded_embd equal the model's query heads, KV heads,
// hidden size and intermediate size, and it holds rows for the run's tp (the message lists the
// TPs it has); at tp > 1 the all-reduce table holds num_workers == tp. vocab_size is not compared:
// Vidur's Llama-2 tables record a padded 32768 where the checkpoint has 32000, and no term here
// depends on the vocabulary. Immutable after construction.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kvsim/core/model_presets.h"
#include "kvsim/sim/engine/profile_tables.h"
#include "kvsim/sim/engine/step_time_model.h"

namespace kvsim {

// The model numbers the profile model checks and uses, for the whole (unsharded) model.
struct ProfileModelShape {
  std::string name;
  int32_t num_layers = 0;
  int32_t num_attention_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  double kv_bytes_per_token_per_rank = 0;  // kappa, all layers (KV dtype, head split, MLA)
};

// kv_cache_dtype "auto" = the model's dtype.
ProfileModelShape profile_model_shape(const ModelSpec& model, int32_t tp,
                                      std::string_view kv_cache_dtype = "auto");

// Attention efficiencies of a card (docs/step-time-model.md §profile gives the sources).
struct AttentionEfficiency {
  double mfu = 0.35;  // prefill attention FLOPs: fraction of dense BF16 peak
  double mbu = 0.7;   // KV reads and writes: fraction of HBM bandwidth
};
AttentionEfficiency default_attention_efficiency(std::string_view gpu_name);

struct ProfileParams {
  double overhead_ms = 1.0;                  // per step, in [0, 3.6e6]
  std::optional<double> attn_mfu, attn_mbu;  // in [0.001, 1]; unset: the card's default
};

class ProfileStepTime final : public StepTimeModel {
 public:
  // `all_reduce` may be empty at tp 1. Throws std::invalid_argument (see the invariants above).
  ProfileStepTime(ProfileModelShape shape, RooflineGpu gpu, int32_t tp, OperatorProfile ops,
                  std::optional<AllReduceProfile> all_reduce, ProfileParams params = {});
  StepTimeBreakdown estimate(const StepWork& work) const override;
  std::string describe() const override;
  std::string calibration() const override;

  // The step's parts in seconds (tests, docs); all 0 for an empty step.
  struct Terms {
    double layers = 0, all_reduce = 0, attn_compute = 0, attn_kv = 0;
  };
  Terms terms(const StepWork& work) const noexcept;
  const AttentionEfficiency& attention_efficiency() const noexcept { return eff_; }

 private:
  ProfileModelShape shape_;
  RooflineGpu gpu_;
  int32_t tp_;
  std::string ops_path_, all_reduce_path_;
  int64_t max_tokens_ = 0;
  PiecewiseLinear layer_ms_;                      // the table's curve for tp
  std::optional<PiecewiseLinear> all_reduce_ms_;  // tp > 1 only
  AttentionEfficiency eff_;
  double overhead_ms_ = 0;
};

// Parses what follows `profile:` (DIR[,key=value...], keys all_reduce, overhead_ms, attn_mfu,
// attn_mbu) and builds the model for `model` on `gpu` at `tp`. Throws std::invalid_argument
// prefixed "--step-time 'SPEC': ".
std::unique_ptr<StepTimeModel> make_profile_step_time(std::string_view spec, const ModelSpec& model,
                                                      const GpuSpec& gpu, int32_t tp,
                                                      std::string_view kv_cache_dtype = "auto");

}  // namespace kvsim
