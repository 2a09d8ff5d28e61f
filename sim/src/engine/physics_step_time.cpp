#include "kvsim/sim/engine/physics_step_time.h"

#include <cmath>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "kvsim/core/param.h"
#include "kvsim/sim/io/line_reader.h"
#include "kvsim/sim/io/strict_json.h"

namespace kvsim {
namespace {

constexpr double kUs = 1e-6;
constexpr int64_t kMaxCalibrationBytes = 1 << 20;  // a calibration is a few hundred bytes

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::invalid_argument(fmt::format("{}: {}", path, what));
}

std::string string_field(const nlohmann::json& j, const std::string& path, const char* key,
                         bool required) {
  if (!j.contains(key)) {
    if (required) fail(path, fmt::format("missing key \"{}\"", key));
    return {};
  }
  if (!j.at(key).is_string()) fail(path, fmt::format("\"{}\" must be a string", key));
  return j.at(key).get<std::string>();
}

template <size_t N>
void read_numbers(const nlohmann::json& j, const std::string& path, const char* key,
                  size_t min_count, size_t max_count, std::array<double, N>& out) {
  if (!j.contains(key)) fail(path, fmt::format("missing key \"{}\"", key));
  const nlohmann::json& a = j.at(key);
  if (!a.is_array() || a.size() < min_count || a.size() > max_count) {
    fail(path, min_count == max_count
                   ? fmt::format("\"{}\" must be an array of {} numbers", key, min_count)
                   : fmt::format("\"{}\" must be an array of {} to {} numbers", key, min_count,
                                 max_count));
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const double v = a[i].is_number() ? a[i].get<double>() : -1.0;
    if (!a[i].is_number() || !std::isfinite(v) || v < 0.0) {
      fail(path, fmt::format("{}[{}] must be a finite number >= 0, got {}", key, i, a[i].dump()));
    }
    if (i < N) out[i] = v;
  }
}

void require_positive(double v, const char* what) {
  if (!(v > 0.0) || !std::isfinite(v)) {
    throw std::invalid_argument(fmt::format("physics step time: {} must be > 0, got {}", what, v));
  }
}

}  // namespace

PhysicsCoefficients read_physics_coefficients(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) {
    fail(path, "not a readable calibration file (" + param("step_time", "physics:FILE") + ")");
  }
  InputLimits limits;
  limits.max_bytes = kMaxCalibrationBytes;
  limits.has_flags = false;
  const nlohmann::json j = parse_strict_json(read_text_file(path, limits), path);
  if (!j.is_object()) fail(path, "a physics calibration must be a JSON object");
  // "fit": what kvsim calibrate records about the fit (model, data, errors); read by people.
  static const std::set<std::string> known = {"format", "source",     "gpu",   "beta",
                                              "alpha",  "validation", "notes", "fit"};
  for (const auto& [key, value] : j.items()) {
    if (!known.contains(key)) fail(path, fmt::format("unknown key \"{}\"", key));
  }
  if (string_field(j, path, "format", true) != "kvsim-physics/1") {
    fail(path,
         fmt::format("\"format\" must be \"kvsim-physics/1\", got {}", j.at("format").dump()));
  }
  PhysicsCoefficients c;
  c.path = path;
  c.source = string_field(j, path, "source", true);
  c.gpu = string_field(j, path, "gpu", false);
  c.validation = string_field(j, path, "validation", false);
  read_numbers(j, path, "beta", 10, 11, c.beta);
  read_numbers(j, path, "alpha", 3, 3, c.alpha);
  c.from_kvsim_calibrate = j.contains("fit");
  return c;
}

PhysicsShape physics_shape(const ModelSpec& m, double weight_bytes_per_param,
                           double kv_bytes_per_element) {
  PhysicsShape s;
  s.name = m.name;
  s.num_layers = static_cast<int32_t>(m.num_layers);
  s.hidden_size = m.hidden_size;
  s.num_attention_heads = static_cast<int32_t>(m.num_attention_heads);
  s.num_kv_heads = static_cast<int32_t>(m.num_kv_heads);
  s.head_dim = static_cast<int32_t>(m.head_dim);
  s.intermediate_size = m.intermediate_size;
  s.num_experts = static_cast<int32_t>(m.num_experts);
  s.num_experts_per_tok = static_cast<int32_t>(m.num_experts_per_tok);
  s.weight_bytes_per_param = weight_bytes_per_param;
  s.kv_bytes_per_element = kv_bytes_per_element;
  return s;
}

PhysicsStepTime::PhysicsStepTime(PhysicsShape shape, RooflineGpu gpu, int32_t tp,
                                 PhysicsCoefficients c)
    : shape_(std::move(shape)), gpu_(std::move(gpu)), tp_(tp), c_(std::move(c)) {
  require_positive(shape_.num_layers, "num_layers");
  require_positive(static_cast<double>(shape_.hidden_size), "hidden_size");
  require_positive(shape_.num_attention_heads, "num_attention_heads");
  require_positive(shape_.num_kv_heads, "num_kv_heads");
  require_positive(shape_.head_dim, "head_dim");
  require_positive(static_cast<double>(shape_.intermediate_size), "intermediate_size");
  require_positive(shape_.weight_bytes_per_param, "weight bytes per parameter");
  require_positive(shape_.kv_bytes_per_element, "KV bytes per element");
  require_positive(gpu_.peak_flops, "GPU peak_flops");
  require_positive(gpu_.hbm_bytes_per_s, "GPU hbm_bytes_per_s");
  if (tp_ < 1 || shape_.num_attention_heads % tp_ != 0) {
    throw std::invalid_argument(
        fmt::format("physics step time: tensor parallel size {} must divide the {} attention heads",
                    tp_, shape_.num_attention_heads));
  }
  if (shape_.num_experts > 0 &&
      !(shape_.num_experts_per_tok > 0 && shape_.num_experts_per_tok <= shape_.num_experts)) {
    throw std::invalid_argument(
        fmt::format("physics step time: MoE needs 0 < experts_per_tok ({}) <= experts ({})",
                    shape_.num_experts_per_tok, shape_.num_experts));
  }
  const double L = shape_.num_layers;
  const auto d = static_cast<double>(shape_.hidden_size);
  const double d_kv = static_cast<double>(shape_.num_kv_heads) * shape_.head_dim;
  const auto f = static_cast<double>(shape_.intermediate_size);
  const double tp_d = tp_;
  const double bpp = shape_.weight_bytes_per_param;
  double ffn_bytes = 3.0 * L * d * f * bpp / tp_d;
  if (shape_.num_experts > 0) ffn_bytes *= shape_.num_experts;  // every expert is resident
  weight_time_s_ = (L * d * (2.0 * d + 2.0 * d_kv) * bpp / tp_d + ffn_bytes) / gpu_.hbm_bytes_per_s;
}

double PhysicsStepTime::proj_flops(double tokens) const noexcept {
  const auto d = static_cast<double>(shape_.hidden_size);
  const double d_kv = static_cast<double>(shape_.num_kv_heads) * shape_.head_dim;
  return 2.0 * shape_.num_layers * tokens * d * (2.0 * d + 2.0 * d_kv) / tp_;
}

double PhysicsStepTime::ffn_flops(double tokens) const noexcept {
  const double per_token = 6.0 * shape_.num_layers * static_cast<double>(shape_.hidden_size) *
                           static_cast<double>(shape_.intermediate_size);
  const double routed = shape_.num_experts > 0 ? shape_.num_experts_per_tok : 1.0;
  return per_token * tokens * routed / tp_;
}

PhysicsStepTime::Terms PhysicsStepTime::terms(const StepWork& w) const noexcept {
  Terms t;
  const double L = shape_.num_layers;
  const double d_kv = static_cast<double>(shape_.num_kv_heads) * shape_.head_dim;
  const double heads_per_gpu = static_cast<double>(shape_.num_attention_heads) / tp_;
  const double attn = 4.0 * L * heads_per_gpu * shape_.head_dim;  // FLOPs per (query, key)
  const auto P = static_cast<double>(w.num_prefill_tokens);
  const auto D = static_cast<double>(w.num_decode_tokens);
  const double kv_per_token = 2.0 * L * d_kv / tp_ * shape_.kv_bytes_per_element;
  if (P > 0) {
    const double pairs = static_cast<double>(w.prefill_context_x_new) +
                         1.5 * static_cast<double>(w.prefill_new_squared);
    t.pf_compute = (proj_flops(P) + ffn_flops(P) + attn * pairs) / gpu_.peak_flops;
    t.pf_kv = kv_per_token * P / gpu_.hbm_bytes_per_s;
  }
  if (D > 0) {
    // A decode's context x 1 new token: the decode part of sum(context * new).
    const auto ctx = static_cast<double>(w.sum_context_x_new - w.prefill_context_x_new);
    t.dc_compute = (proj_flops(D) + ffn_flops(D) + attn * ctx) / gpu_.peak_flops;
    t.dc_kv = kv_per_token * (ctx + D) / gpu_.hbm_bytes_per_s;
  }
  t.weight = weight_time_s_;
  if (tp_ > 1) {
    t.tp = 2.0 * L * (P + D) * static_cast<double>(shape_.hidden_size) * 2.0 * 2.0 * (tp_ - 1.0) /
           tp_ / gpu_.hbm_bytes_per_s;
  }
  return t;
}

StepTimeBreakdown PhysicsStepTime::estimate(const StepWork& work) const {
  StepTimeBreakdown b;
  if (work.empty()) return b;
  const Terms t = terms(work);
  const auto& beta = c_.beta;
  b.compute_s = beta[0] * t.pf_compute + beta[1] * t.dc_compute;
  b.memory_s = beta[8] * t.pf_kv + beta[9] * t.dc_kv + beta[2] * t.weight;
  b.overhead_s =
      beta[3] * t.tp + (beta[4] * shape_.num_layers + beta[5] * work.num_seqs + beta[6]) * kUs;
  b.total_s = b.compute_s + b.memory_s + b.overhead_s;
  return b;
}

RequestOverheads PhysicsStepTime::request_overheads() const {
  RequestOverheads o;
  o.queueing_s = c_.alpha[0] * kUs;
  o.completion_s = c_.alpha[1] * kUs;
  o.per_output_token_s = c_.alpha[2] * kUs;
  return o;
}

std::string PhysicsStepTime::calibration() const {
  if (!c_.gpu.empty() && c_.gpu != gpu_.name) {
    return fmt::format("uncalibrated for {}: {} was fitted on {}", gpu_.name, c_.path, c_.gpu);
  }
  return fmt::format("fitted ({}){}", c_.source, c_.validation.empty() ? "" : "; " + c_.validation);
}

std::string PhysicsStepTime::describe() const {
  return fmt::format("physics({} on {}, tp={}, coefficients {}{}{})", shape_.name, gpu_.name, tp_,
                     c_.path, c_.gpu.empty() ? "" : ", fitted on " + c_.gpu,
                     c_.gpu.empty() || c_.gpu == gpu_.name ? "" : ": uncalibrated for this card");
}

}  // namespace kvsim
