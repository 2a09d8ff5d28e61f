#include "kvsim/sim/engine/step_time_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>
#include <system_error>

#include <fmt/core.h>

namespace kvsim {

int64_t StepTimeModel::step_time_ns(const StepWork& work) const {
  const double s = estimate(work).total_s;
  if (!(s >= 0 && s <= kMaxStepSeconds)) {
    throw std::runtime_error(fmt::format(
        "step time model {} gives {:g} s for a step of {} tokens in {} sequences (limit {:g} s "
        "per step)",
        describe(), s, work.num_tokens(), work.num_seqs, kMaxStepSeconds));
  }
  return std::llround(s * 1e9);
}

FixedStepTime::FixedStepTime(double ms) : ms_(ms) {
  // The clock counts whole nanoseconds: a step below 1 ns would round to 0 and stop time.
  if (!(ms >= 1e-6 && ms <= kMaxStepSeconds * 1e3)) {
    throw std::invalid_argument(
        fmt::format("fixed step time must be in [1e-06, {:g}] ms (1 ns to one hour), got {:g}",
                    kMaxStepSeconds * 1e3, ms));
  }
}

StepTimeBreakdown FixedStepTime::estimate(const StepWork& work) const {
  StepTimeBreakdown b;
  if (work.empty()) return b;
  b.overhead_s = ms_ * 1e-3;
  b.total_s = b.overhead_s;
  return b;
}

std::string FixedStepTime::describe() const {
  return fmt::format("fixed:{}ms", ms_);
}

namespace {

void require_positive(double v, const char* what) {
  if (!(v > 0.0) || !std::isfinite(v)) {
    throw std::invalid_argument(fmt::format("roofline step time: {} must be > 0, got {}", what, v));
  }
}

// Utilisations below 0.1% are typos (and would make a step take years).
constexpr double kMinUtilisation = 1e-3;

void require_fraction(double v, const char* what) {
  if (!(v >= kMinUtilisation && v <= 1.0)) {
    throw std::invalid_argument(
        fmt::format("{} must be in [{:g}, 1], got {:g}", what, kMinUtilisation, v));
  }
}

}  // namespace

RooflineStepTime::RooflineStepTime(RooflineModelShape model, RooflineGpu gpu, RooflineParams params)
    : model_(std::move(model)), gpu_(std::move(gpu)), params_(params) {
  require_positive(model_.active_params, "active_params");
  require_positive(model_.weight_bytes, "weight_bytes");
  require_positive(model_.num_layers, "num_layers");
  require_positive(model_.num_attention_heads, "num_attention_heads");
  require_positive(model_.head_dim, "head_dim");
  require_positive(model_.kv_bytes_per_token_per_rank, "kv_bytes_per_token_per_rank");
  if (model_.num_experts > 0 &&
      !(model_.num_experts_per_tok > 0 && model_.num_experts_per_tok <= model_.num_experts &&
        model_.routed_expert_weight_bytes >= 0 &&
        model_.routed_expert_weight_bytes <= model_.weight_bytes)) {
    throw std::invalid_argument(fmt::format(
        "roofline step time: MoE shape needs 0 < experts_per_tok ({}) <= experts ({}) and 0 <= "
        "expert bytes ({}) <= weight bytes ({})",
        model_.num_experts_per_tok, model_.num_experts, model_.routed_expert_weight_bytes,
        model_.weight_bytes));
  }
  require_positive(gpu_.peak_flops, "GPU peak_flops");
  require_positive(gpu_.hbm_bytes_per_s, "GPU hbm_bytes_per_s");
  require_fraction(params_.mfu, "mfu");
  require_fraction(params_.mbu, "mbu");
  if (!(params_.overhead_ms >= 0.0 && params_.overhead_ms <= kMaxStepSeconds * 1e3)) {
    throw std::invalid_argument(fmt::format("overhead_ms must be in [0, {:g}] (one hour), got {:g}",
                                            kMaxStepSeconds * 1e3, params_.overhead_ms));
  }
  if (params_.tensor_parallel_size < 1) {
    throw std::invalid_argument(
        fmt::format("tensor_parallel_size must be >= 1, got {}", params_.tensor_parallel_size));
  }
}

double RooflineStepTime::flops(const StepWork& work) const noexcept {
  const double tokens = static_cast<double>(work.num_tokens());
  const double linear = 2.0 * model_.active_params * tokens;
  // QK^T and PV: 2 * d_h FLOPs each per (query, key) pair per head per layer.
  const double pairs =
      static_cast<double>(work.sum_context_x_new) + 0.5 * static_cast<double>(work.sum_new_squared);
  const double attention = 4.0 * model_.num_layers *
                           static_cast<double>(model_.num_attention_heads) * model_.head_dim *
                           pairs;
  return (linear + attention) / params_.tensor_parallel_size;
}

double RooflineStepTime::weight_bytes_read(int64_t num_tokens) const noexcept {
  if (model_.num_experts <= 0 || model_.routed_expert_weight_bytes <= 0) return model_.weight_bytes;
  const double miss = 1.0 - static_cast<double>(model_.num_experts_per_tok) / model_.num_experts;
  const double hit_fraction = 1.0 - std::pow(miss, static_cast<double>(num_tokens));
  return model_.weight_bytes - model_.routed_expert_weight_bytes +
         model_.routed_expert_weight_bytes * hit_fraction;
}

double RooflineStepTime::bytes_moved(const StepWork& work) const noexcept {
  const double weights = weight_bytes_read(work.num_tokens()) / params_.tensor_parallel_size;
  const double kv_tokens = static_cast<double>(work.sum_context_tokens + work.num_tokens());
  return weights + model_.kv_bytes_per_token_per_rank * kv_tokens;
}

StepTimeBreakdown RooflineStepTime::estimate(const StepWork& work) const {
  StepTimeBreakdown b;
  if (work.empty()) return b;
  b.compute_s = flops(work) / (gpu_.peak_flops * params_.mfu);
  b.memory_s = bytes_moved(work) / (gpu_.hbm_bytes_per_s * params_.mbu);
  b.overhead_s = params_.overhead_ms * 1e-3;
  b.total_s = std::max(b.compute_s, b.memory_s) + b.overhead_s;
  return b;
}

std::string RooflineStepTime::describe() const {
  return fmt::format("roofline({} on {}, tp={}, mfu={}, mbu={}, overhead_ms={})", model_.name,
                     gpu_.name, params_.tensor_parallel_size, params_.mfu, params_.mbu,
                     params_.overhead_ms);
}

namespace {

double parse_number(std::string_view spec, std::string_view key, std::string_view text) {
  double v = 0.0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, v);
  if (text.empty() || ec != std::errc{} || ptr != last || !std::isfinite(v)) {
    throw std::invalid_argument(
        fmt::format("--step-time '{}': {} must be a number, got '{}'", spec, key, text));
  }
  return v;
}

}  // namespace

std::unique_ptr<StepTimeModel> parse_step_time_spec(std::string_view spec,
                                                    const RooflineModelShape& model,
                                                    const RooflineGpu& gpu, int32_t tp) {
  const auto colon = spec.find(':');
  const std::string_view kind = spec.substr(0, colon);
  const std::string_view rest =
      colon == std::string_view::npos ? std::string_view{} : spec.substr(colon + 1);
  try {
    if (kind == "fixed") {
      if (colon == std::string_view::npos) {
        throw std::invalid_argument("expected fixed:MS (milliseconds per step)");
      }
      return std::make_unique<FixedStepTime>(parse_number(spec, "MS", rest));
    }
    if (kind != "roofline") {
      throw std::invalid_argument(
          fmt::format("unknown model '{}' (expected fixed:MS or roofline[:overhead_ms=..,mfu=..,"
                      "mbu=..])",
                      kind));
    }
    if (colon != std::string_view::npos && rest.empty()) {
      throw std::invalid_argument("empty parameter list after 'roofline:'");
    }
    RooflineParams params;
    params.tensor_parallel_size = tp;
    bool seen_overhead = false, seen_mfu = false, seen_mbu = false;
    std::string_view todo = rest;
    while (!todo.empty()) {
      const auto comma = todo.find(',');
      const std::string_view item = todo.substr(0, comma);
      todo = comma == std::string_view::npos ? std::string_view{} : todo.substr(comma + 1);
      if (comma != std::string_view::npos && todo.empty()) {
        throw std::invalid_argument("trailing ','");
      }
      const auto eq = item.find('=');
      if (eq == std::string_view::npos) {
        throw std::invalid_argument(fmt::format("expected key=value, got '{}'", item));
      }
      const std::string_view key = item.substr(0, eq);
      const double value = parse_number(spec, key, item.substr(eq + 1));
      bool* seen = nullptr;
      if (key == "overhead_ms") {
        params.overhead_ms = value;
        seen = &seen_overhead;
      } else if (key == "mfu") {
        params.mfu = value;
        seen = &seen_mfu;
      } else if (key == "mbu") {
        params.mbu = value;
        seen = &seen_mbu;
      } else {
        throw std::invalid_argument(
            fmt::format("unknown parameter '{}' (expected overhead_ms, mfu, mbu)", key));
      }
      if (*seen) throw std::invalid_argument(fmt::format("parameter '{}' given twice", key));
      *seen = true;
    }
    return std::make_unique<RooflineStepTime>(model, gpu, params);
  } catch (const std::invalid_argument& e) {
    const std::string_view msg = e.what();
    if (msg.starts_with("--step-time")) throw;
    throw std::invalid_argument(fmt::format("--step-time '{}': {}", spec, msg));
  }
}

}  // namespace kvsim
