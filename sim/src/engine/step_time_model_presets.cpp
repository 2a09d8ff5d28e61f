// Roofline inputs from the planner's ModelSpec/GpuSpec presets.
#include <stdexcept>
#include <string>

#include <fmt/core.h>

#include "kvsim/core/param.h"
#include "kvsim/core/planner.h"
#include "kvsim/sim/engine/physics_step_time.h"
#include "kvsim/sim/engine/profile_step_time.h"
#include "kvsim/sim/engine/step_time_model.h"

namespace kvsim {

RooflineModelShape roofline_shape(const ModelSpec& model, int32_t tp,
                                  std::string_view kv_cache_dtype, double weight_bytes_total) {
  if (tp < 1)
    throw std::invalid_argument(fmt::format("tensor parallel size must be >= 1, got {}", tp));
  const double total_params = model.num_parameters;
  const double active_params =
      model.num_active_parameters > 0 ? model.num_active_parameters : total_params;
  if (!(total_params > 0)) {
    throw std::invalid_argument(
        fmt::format("roofline step time: model '{}' has no parameter count (use {})", model.name,
                    param("step_time", "fixed:MS")));
  }
  RooflineModelShape s;
  s.name = model.name;
  s.active_params = active_params;
  s.weight_bytes =
      weight_bytes_total > 0 ? weight_bytes_total : total_params * dtype_bytes(model.dtype);
  s.num_layers = static_cast<int32_t>(model.num_layers);
  if (model.vocab_size > 0 && model.hidden_size > 0) {
    s.lm_head_params =
        static_cast<double>(model.vocab_size) * static_cast<double>(model.hidden_size);
    s.embedding_params = s.lm_head_params * (model.tie_word_embeddings ? 1.0 : 2.0);
    if (s.embedding_params >= active_params) s.lm_head_params = s.embedding_params = 0;
  }
  s.hidden_size = model.hidden_size;
  s.num_attention_heads = static_cast<int32_t>(
      model.num_attention_heads > 0 ? model.num_attention_heads : model.num_kv_heads);
  s.head_dim = static_cast<int32_t>(model.head_dim);
  const std::string kv_dtype = kv_cache_dtype == "auto" ? model.dtype : std::string(kv_cache_dtype);
  const int64_t heads = model.use_mla ? 1 : kv_heads_per_rank(model.num_kv_heads, tp);
  s.kv_bytes_per_token_per_rank = static_cast<double>(page_size_bytes(model, heads, kv_dtype, 1)) *
                                  static_cast<double>(model.num_layers);
  if (model.num_experts > 0 && model.num_experts_per_tok > 0 &&
      model.num_experts > model.num_experts_per_tok && total_params > active_params) {
    const double per_expert_params =
        (total_params - active_params) /
        static_cast<double>(model.num_experts - model.num_experts_per_tok);
    s.num_experts = static_cast<int32_t>(model.num_experts);
    s.num_experts_per_tok = static_cast<int32_t>(model.num_experts_per_tok);
    s.routed_expert_weight_bytes = per_expert_params * static_cast<double>(model.num_experts) *
                                   (s.weight_bytes / total_params);
  }
  return s;
}

RooflineGpu roofline_gpu(const GpuSpec& gpu) {
  if (!(gpu.peak_bf16_tflops > 0) || !(gpu.hbm_gb_per_s > 0)) {
    throw std::invalid_argument(
        fmt::format("roofline step time: GPU '{}' has no peak TFLOP/s or HBM bandwidth (use {})",
                    gpu.name, param("step_time", "fixed:MS")));
  }
  RooflineGpu g{gpu.name, gpu.peak_bf16_tflops * 1e12, gpu.hbm_gb_per_s * 1e9};
  // The presets quote the link's two directions together; a ring sends and receives at once.
  g.interconnect_bytes_per_s = gpu.interconnect_gb_per_s * 1e9 / 2.0;
  g.interconnect_latency_s = gpu.interconnect_latency_us * 1e-6;
  return g;
}

std::unique_ptr<StepTimeModel> parse_step_time_spec(std::string_view spec, const ModelSpec& model,
                                                    const GpuSpec& gpu, int32_t tp,
                                                    std::string_view kv_cache_dtype,
                                                    double weight_bytes_total) {
  if (spec.starts_with("fixed"))
    return parse_step_time_spec(spec, RooflineModelShape{}, RooflineGpu{}, tp);
  if (spec.starts_with("profile:") || spec == "profile")
    return make_profile_step_time(spec, model, gpu, tp, kv_cache_dtype);
  // calibrated:FILE is physics:FILE for a file `kvsim calibrate` wrote (it must carry the fit
  // record, so a published coefficient set is not mistaken for the user's own fit).
  const bool calibrated = spec.starts_with("calibrated:") || spec == "calibrated";
  if (calibrated || spec.starts_with("physics:") || spec == "physics") {
    const std::string_view kind = calibrated ? "calibrated:" : "physics:";
    const std::string_view file = spec.substr(std::min(spec.size(), kind.size()));
    if (file.empty()) {
      throw std::invalid_argument(fmt::format(
          "{}: expected {}FILE ({})", param("step_time", fmt::format("'{}'", spec)), kind,
          calibrated ? "what kvsim calibrate -o FILE wrote"
                     : "a calibration JSON, e.g. calibration/physics/h100-vllm-blis.json"));
    }
    try {
      const std::string kv_dtype =
          kv_cache_dtype == "auto" ? model.dtype : std::string(kv_cache_dtype);
      const double params = model.num_parameters;
      if (!(params > 0)) {
        throw std::invalid_argument(fmt::format("model '{}' has no parameter count", model.name));
      }
      const double weight_bytes =
          weight_bytes_total > 0 ? weight_bytes_total : params * dtype_bytes(model.dtype);
      const double kv_element = dtype_bytes(kv_dtype);
      PhysicsCoefficients c = read_physics_coefficients(std::string(file));
      if (calibrated && !c.from_kvsim_calibrate) {
        throw std::invalid_argument(fmt::format(
            "{}: not written by kvsim calibrate (no \"fit\" record); published coefficients are "
            "read with physics:FILE",
            file));
      }
      return std::make_unique<PhysicsStepTime>(
          physics_shape(model, weight_bytes / params, kv_element), roofline_gpu(gpu), tp,
          std::move(c));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(
          fmt::format("{}: {}", param("step_time", fmt::format("'{}'", spec)), e.what()));
    }
  }
  return parse_step_time_spec(spec, roofline_shape(model, tp, kv_cache_dtype, weight_bytes_total),
                              roofline_gpu(gpu), tp);
}

std::unique_ptr<StepTimeModel> make_step_time_model(std::string_view spec, const PlanInputs& inputs,
                                                    const Plan& plan) {
  const auto tp = static_cast<int32_t>(plan.tensor_parallel_size);
  return parse_step_time_spec(spec, inputs.model, inputs.gpu, tp, plan.kv_cache_dtype,
                              static_cast<double>(plan.weights_bytes) * tp);
}

}  // namespace kvsim
