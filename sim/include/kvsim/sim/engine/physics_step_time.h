// `--step-time physics:FILE`: roofline terms, each scaled by a fitted coefficient, plus fixed
// overheads ("trained physics", the form of inference-sim's BLIS latency model). FILE is a JSON
// calibration (format below); calibration/physics/h100-vllm-blis.json ships the coefficients
// BLIS published for vLLM on H100 (attribution in calibration/README.md).
//
// Per step, on one GPU of a tensor-parallel group of tp, with L layers, hidden d, q heads h,
// head width d_h, d_kv = n_kv * d_h, FFN width f, b_w weight bytes per parameter, b_kv KV bytes
// per element, F = peak FLOP/s, W = HBM bytes/s, P/D = prefill/decode tokens, B = sequences:
//   proj(T)   = 2 L T d (2d + 2 d_kv) / tp                   (Q, K, V, O projections)
//   ffn(T)    = 6 L T d f / tp; MoE: 6 L (T k / tp) d f        (gated MLP; k experts per token)
//   T_pf_c    = (proj(P) + ffn(P) + 4 L (h/tp) d_h sum_pf(c t + 1.5 t^2)) / F
//   T_pf_kv   = 2 L (d_kv/tp) b_kv P / W
//   T_dc_c    = (proj(D) + ffn(D) + 4 L (h/tp) d_h sum_dc(c)) / F
//   T_dc_kv   = 2 L (d_kv/tp) b_kv (sum_dc(c) + D) / W
//   T_weight  = (L d (2d + 2 d_kv) b_w / tp + 3 L d f b_w (dense: / tp; MoE: x E / tp)) / W
//   T_tp      = 2 L (P + D) d 2 2 (tp - 1)/tp / W               (ring all-reduces, 0 at tp 1)
//   step      = b1a T_pf_c + b1b T_pf_kv + b2a T_dc_c + b2b T_dc_kv + b3 T_weight + b4 T_tp
//               + b5 L + b6 B + b7                              (b5..b7 in microseconds)
// where c is a sequence's cached context and t its new tokens (sum_pf(c t + 1.5 t^2) is BLIS's
// t (s + t/2) with the prompt length s = c + t of a prefill's last chunk). Request overheads
// a0 (queueing), a1 (completion), a2 (per output token), in microseconds, become the model's
// RequestOverheads. Not modelled: interleaved MoE layers (b8), expert parallelism.
//
// Calibration file (JSON object; unknown keys refused):
//   "format": "kvsim-physics/1", "source": "...", "gpu": "h100-80g" (optional: the card it was
//   fitted on), "beta": [b1a, b2a, b3, b4, b5, b6, b7, b8, b1b, b2b] (BLIS's order, 10 or 11
//   numbers, the 11th ignored), "alpha": [a0, a1, a2], optional "validation": "..." (the
//   measured error, quoted in reports). Every coefficient finite and >= 0.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "kvsim/core/model_presets.h"
#include "kvsim/sim/engine/step_time_model.h"

namespace kvsim {

struct PhysicsCoefficients {
  std::array<double, 10> beta{};      // BLIS order: b1a b2a b3 b4 b5 b6 b7 b8 b1b b2b
  std::array<double, 3> alpha{};      // a0 queueing, a1 completion, a2 per output token (us)
  std::string source;                 // where the numbers come from
  std::string gpu;                    // card they were fitted on ("" = unstated)
  std::string validation;             // measured error, as published or as kvsim measured it
  std::string path;                   // the file read
  bool from_kvsim_calibrate = false;  // the file has kvsim calibrate's "fit" record
};

// Reads and validates a calibration file. Throws std::invalid_argument naming the file and the
// key (e.g. "physics.json: beta[3] must be finite and >= 0, got -1").
PhysicsCoefficients read_physics_coefficients(const std::string& path);

// The model shape the physics terms need, per whole model.
struct PhysicsShape {
  std::string name;
  int32_t num_layers = 0;
  int64_t hidden_size = 0;
  int32_t num_attention_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int64_t intermediate_size = 0;  // dense MLP width; MoE: each expert's width
  int32_t num_experts = 0;        // 0 = dense
  int32_t num_experts_per_tok = 0;
  double weight_bytes_per_param = 2.0;
  double kv_bytes_per_element = 2.0;
};

PhysicsShape physics_shape(const ModelSpec& model, double weight_bytes_per_param,
                           double kv_bytes_per_element);

class PhysicsStepTime final : public StepTimeModel {
 public:
  // Throws std::invalid_argument when a shape or card number is not positive, or tp does not
  // divide the heads.
  PhysicsStepTime(PhysicsShape shape, RooflineGpu gpu, int32_t tp, PhysicsCoefficients c);
  StepTimeBreakdown estimate(const StepWork& work) const override;
  std::string describe() const override;
  std::string calibration() const override;
  RequestOverheads request_overheads() const override;

  // The basis terms of one step in seconds, before coefficients (tests, docs).
  struct Terms {
    double pf_compute = 0, pf_kv = 0, dc_compute = 0, dc_kv = 0, weight = 0, tp = 0;
  };
  Terms terms(const StepWork& work) const noexcept;

 private:
  double proj_flops(double tokens) const noexcept;
  double ffn_flops(double tokens) const noexcept;

  PhysicsShape shape_;
  RooflineGpu gpu_;
  int32_t tp_;
  PhysicsCoefficients c_;
  double weight_time_s_ = 0;  // T_weight: the same every step
};

}  // namespace kvsim
