#include "kvsim/sim/engine/step_time_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>
#include <system_error>

#include <fmt/core.h>

#include "kvsim/core/param.h"

namespace kvsim {

int64_t StepTimeModel::step_time_ns(const StepWork& work, bool overlap_cpu) const {
  const StepTimeBreakdown b = estimate(work);
  const double s = overlap_cpu && b.cpu_s > 0 ? std::max(b.total_s - b.cpu_s, b.cpu_s) : b.total_s;
  if (!(s >= 0 && s <= kMaxStepSeconds)) {
    throw std::runtime_error(fmt::format(
        "step time model {} gives {:g} s for a step of {} tokens in {} sequences (limit {:g} s "
        "per step)",
        describe(), s, work.num_tokens(), work.num_seqs, kMaxStepSeconds));
  }
  // std::llround(x) for 0 <= x <= 3.6e12 (kMaxStepSeconds), inline: x - trunc(x) is exact
  // below 2^53, so this rounds halves away from zero exactly as llround, without the libm call
  // a step (1 % of a fixed-step Azure replay).
  const double x = s * 1e9;
  auto ns = static_cast<int64_t>(x);
  if (x - static_cast<double>(ns) >= 0.5) ++ns;
  return ns;
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

std::optional<int64_t> FixedStepTime::constant_step_ns() const {
  // cpu_s is 0, so overlapping changes nothing; one decode token stands for any non-empty step.
  StepWork one;
  one.add_sequence(0, 1, false);
  return step_time_ns(one);
}

std::string FixedStepTime::calibration() const {
  return "none: a fixed time per step, not a latency model";
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
  for (const auto& [value, what] :
       {std::pair{params_.cpu_ms, "cpu_ms"}, std::pair{params_.queue_ms, "queue_ms"},
        std::pair{params_.token_ms, "token_ms"}}) {
    if (!(value >= 0.0 && value <= kMaxStepSeconds * 1e3)) {
      throw std::invalid_argument(fmt::format("{} must be in [0, {:g}] (one hour), got {:g}", what,
                                              kMaxStepSeconds * 1e3, value));
    }
  }
  if (!(params_.seq_us >= 0.0 && params_.seq_us <= 1e6)) {
    throw std::invalid_argument(
        fmt::format("seq_us must be in [0, 1e6], got {:g}", params_.seq_us));
  }
  if (!(params_.allreduce_hop_us <= 1e6) || std::isnan(params_.allreduce_hop_us)) {
    throw std::invalid_argument(
        fmt::format("allreduce_hop_us must be at most 1e6, got {:g}", params_.allreduce_hop_us));
  }
  if (!(gpu_.interconnect_bytes_per_s >= 0 && gpu_.interconnect_latency_s >= 0)) {
    throw std::invalid_argument("roofline step time: interconnect numbers must be >= 0");
  }
}

int64_t RooflineStepTime::cuda_graph_size(int64_t tokens) noexcept {
  // vLLM's default cudagraph_capture_sizes: 1, 2, 4, then every multiple of 8 up to 512.
  if (tokens <= 2) return tokens <= 1 ? 1 : 2;
  if (tokens <= 4) return 4;
  if (tokens > 512) return tokens;
  return (tokens + 7) / 8 * 8;
}

double RooflineStepTime::comm_seconds(const StepWork& work) const noexcept {
  const int32_t tp = params_.tensor_parallel_size;
  if (!params_.allreduce || tp <= 1 || gpu_.interconnect_bytes_per_s <= 0 ||
      model_.hidden_size <= 0) {
    return 0.0;
  }
  const double latency_s = params_.allreduce_hop_us >= 0
                               ? 2.0 * (tp - 1) * params_.allreduce_hop_us * 1e-6
                           : params_.allreduce_us >= 0 ? params_.allreduce_us * 1e-6
                                                       : gpu_.interconnect_latency_s;
  // Two all-reduces per layer (after attention and after the MLP) of the step's activations in
  // 16-bit; a ring sends 2 (tp - 1)/tp of the buffer out of each GPU (and receives as much).
  const double bytes =
      static_cast<double>(work.num_tokens()) * static_cast<double>(model_.hidden_size) * 2.0;
  const double one = 2.0 * (tp - 1) / tp * bytes / gpu_.interconnect_bytes_per_s + latency_s;
  return 2.0 * model_.num_layers * one;
}

double RooflineStepTime::flops(const StepWork& work) const noexcept {
  int64_t t = work.num_tokens();
  if (params_.cuda_graph_padding && work.num_prefill_tokens == 0) t = cuda_graph_size(t);
  const auto tokens = static_cast<double>(t);
  double linear = 2.0 * model_.active_params * tokens;
  if (params_.lm_head) {
    // The embedding lookup is no GEMM and the LM head runs once per sampled sequence.
    linear = 2.0 * (model_.active_params - model_.embedding_params) * tokens +
             2.0 * model_.lm_head_params * static_cast<double>(work.num_seqs);
  }
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
  b.overhead_s = params_.overhead_ms * 1e-3 + params_.seq_us * 1e-6 * work.num_seqs;
  b.comm_s = comm_seconds(work);
  b.cpu_s = params_.cpu_ms * 1e-3;
  b.total_s = std::max(b.compute_s, b.memory_s) + b.overhead_s + b.comm_s + b.cpu_s;
  return b;
}

std::string RooflineStepTime::calibration() const {
  if (!params_.fitted.empty()) return params_.fitted;
  return "uncalibrated: roofline constants not fitted to measurements (errors against 16 real "
         "vLLM runs: docs/latency-validation.md; fit yours with kvsim calibrate)";
}

RequestOverheads RooflineStepTime::request_overheads() const {
  RequestOverheads o;
  o.queueing_s = params_.queue_ms * 1e-3;
  o.per_output_token_s = params_.token_ms * 1e-3;
  return o;
}

std::string RooflineStepTime::describe() const {
  // The historical fields first; the newer terms only when they are in use.
  std::string extra;
  if (params_.cpu_ms > 0) extra += fmt::format(", cpu_ms={}", params_.cpu_ms);
  if (params_.cuda_graph_padding) extra += ", cuda_graphs=1";
  if (params_.queue_ms > 0) extra += fmt::format(", queue_ms={}", params_.queue_ms);
  if (params_.token_ms > 0) extra += fmt::format(", token_ms={}", params_.token_ms);
  if (params_.lm_head) extra += ", lm_head=1";
  if (params_.seq_us > 0) extra += fmt::format(", seq_us={}", params_.seq_us);
  if (params_.allreduce) {
    const int32_t tp = params_.tensor_parallel_size;
    const double us = params_.allreduce_hop_us >= 0 ? 2.0 * (tp - 1) * params_.allreduce_hop_us
                      : params_.allreduce_us >= 0   ? params_.allreduce_us
                                                    : gpu_.interconnect_latency_s * 1e6;
    extra += params_.tensor_parallel_size <= 1 ? std::string(", allreduce=1 (tp 1: none)")
             : gpu_.interconnect_bytes_per_s > 0 && model_.hidden_size > 0
                 ? fmt::format(", all-reduce over {:g} GB/s + {:g} us{}",
                               gpu_.interconnect_bytes_per_s / 1e9, us,
                               params_.allreduce_hop_us >= 0
                                   ? fmt::format(" ({} ring steps x {:g} us)", 2 * (tp - 1),
                                                 params_.allreduce_hop_us)
                                   : std::string())
                 : std::string(", all-reduce not modelled (the card's link is unknown)");
  }
  return fmt::format("roofline({} on {}, tp={}, mfu={}, mbu={}, overhead_ms={}{})", model_.name,
                     gpu_.name, params_.tensor_parallel_size, params_.mfu, params_.mbu,
                     params_.overhead_ms, extra);
}

namespace {

double parse_number(std::string_view key, std::string_view text) {
  double v = 0.0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, v);
  if (text.empty() || ec != std::errc{} || ptr != last || !std::isfinite(v)) {
    throw std::invalid_argument(fmt::format("{} must be a number, got '{}'", key, text));
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
      return std::make_unique<FixedStepTime>(parse_number("MS", rest));
    }
    if (kind != "roofline") {
      throw std::invalid_argument(
          fmt::format("unknown model '{}' (expected fixed:MS, roofline[:key=value,...], "
                      "physics:FILE, calibrated:FILE or profile:DIR)",
                      kind));
    }
    if (colon != std::string_view::npos && rest.empty()) {
      throw std::invalid_argument("empty parameter list after 'roofline:'");
    }
    // `v0` first: the historical constants on every card; otherwise the card's fitted defaults.
    std::string_view todo = rest;
    bool v0 = false;
    if (todo == "v0" || todo.starts_with("v0,")) {
      v0 = true;
      todo = todo.substr(std::min(todo.size(), std::size_t{3}));
      if (rest.size() == 3 && rest.back() == ',') throw std::invalid_argument("trailing ','");
    }
    RooflineParams params;
    const RooflineCardDefaults* card = v0 ? nullptr : roofline_card_defaults(gpu);
    if (card != nullptr) params = card->params;
    params.tensor_parallel_size = tp;
    std::string overridden;
    bool seen_overhead = false, seen_mfu = false, seen_mbu = false, seen_cpu = false,
         seen_graphs = false, seen_queue = false, seen_token = false, seen_allreduce = false,
         seen_allreduce_us = false, seen_lm_head = false, seen_seq = false, seen_hop = false;
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
      const double value = parse_number(key, item.substr(eq + 1));
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
      } else if (key == "cpu_ms") {
        params.cpu_ms = value;
        seen = &seen_cpu;
      } else if (key == "queue_ms") {
        params.queue_ms = value;
        seen = &seen_queue;
      } else if (key == "token_ms") {
        params.token_ms = value;
        seen = &seen_token;
      } else if (key == "allreduce") {
        if (value != 0.0 && value != 1.0) {
          throw std::invalid_argument(fmt::format("allreduce must be 0 or 1, got {:g}", value));
        }
        params.allreduce = value == 1.0;
        seen = &seen_allreduce;
      } else if (key == "allreduce_us") {
        if (!(value >= 0 && value <= 1e6)) {
          throw std::invalid_argument(
              fmt::format("allreduce_us must be in [0, 1e6], got {:g}", value));
        }
        params.allreduce_us = value;
        seen = &seen_allreduce_us;
      } else if (key == "lm_head") {
        if (value != 0.0 && value != 1.0) {
          throw std::invalid_argument(fmt::format("lm_head must be 0 or 1, got {:g}", value));
        }
        params.lm_head = value == 1.0;
        seen = &seen_lm_head;
      } else if (key == "seq_us") {
        if (!(value >= 0 && value <= 1e6)) {
          throw std::invalid_argument(fmt::format("seq_us must be in [0, 1e6], got {:g}", value));
        }
        params.seq_us = value;
        seen = &seen_seq;
      } else if (key == "allreduce_hop_us") {
        if (!(value >= 0 && value <= 1e6)) {
          throw std::invalid_argument(
              fmt::format("allreduce_hop_us must be in [0, 1e6], got {:g}", value));
        }
        params.allreduce_hop_us = value;
        seen = &seen_hop;
      } else if (key == "cuda_graphs") {
        if (value != 0.0 && value != 1.0) {
          throw std::invalid_argument(fmt::format("cuda_graphs must be 0 or 1, got {:g}", value));
        }
        params.cuda_graph_padding = value == 1.0;
        seen = &seen_graphs;
      } else {
        throw std::invalid_argument(fmt::format(
            "unknown parameter '{}' (expected v0 first, or overhead_ms, mfu, mbu, cpu_ms, "
            "cuda_graphs, queue_ms, token_ms, allreduce, allreduce_us, allreduce_hop_us, "
            "lm_head, seq_us)",
            key));
      }
      if (*seen) throw std::invalid_argument(fmt::format("parameter '{}' given twice", key));
      *seen = true;
      if (card != nullptr) overridden += fmt::format("{}{}", overridden.empty() ? "" : ", ", key);
    }
    if (card != nullptr && !overridden.empty()) {
      params.fitted += fmt::format(" (overridden by the spec: {})", overridden);
    }
    return std::make_unique<RooflineStepTime>(model, gpu, params);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(
        fmt::format("{}: {}", param("step_time", fmt::format("'{}'", spec)), e.what()));
  }
}

}  // namespace kvsim
