#include "kvsim/sim/engine/profile_step_time.h"

#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "kvsim/core/param.h"
#include "kvsim/core/planner.h"
#include "kvsim/sim/io/parse_number.h"

namespace kvsim {
namespace {

constexpr double kMs = 1e-3;

// The table's curve for the run's TP, or an error naming the TPs it has.
PiecewiseLinear curve_for_tp(const OperatorProfile& ops, int32_t tp) {
  const auto it = ops.layer_ms.find(tp);
  if (it == ops.layer_ms.end()) {
    throw std::invalid_argument(
        fmt::format("{}: no rows for tensor parallel size {} (num_tensor_parallel_workers "
                    "profiled: {})",
                    ops.path, tp, profile_keys(ops.layer_ms)));
  }
  return it->second;
}

std::optional<PiecewiseLinear> all_reduce_for_tp(const std::optional<AllReduceProfile>& ar,
                                                 int32_t tp) {
  if (tp == 1) return std::nullopt;
  if (!ar) {
    throw std::invalid_argument(fmt::format(
        "tensor parallel size {} needs an all-reduce table: add ,all_reduce=FILE (e.g. "
        "calibration/vidur/network/h100_dgx/all_reduce.csv) or put all_reduce.csv in the "
        "profile directory",
        tp));
  }
  const auto it = ar->ms_by_workers.find(tp);
  if (it == ar->ms_by_workers.end()) {
    throw std::invalid_argument(
        fmt::format("{}: no single-node rows for num_workers {} (profiled: {})", ar->path, tp,
                    profile_keys(ar->ms_by_workers)));
  }
  return it->second;
}

void check_shape(const OperatorProfile& ops, const ProfileModelShape& m) {
  std::string diff;
  const auto check = [&](const char* column, int64_t table, const char* field, int64_t model) {
    if (table != model) {
      diff += fmt::format("{}table {} = {}, model {} = {}", diff.empty() ? "" : "; ", column, table,
                          field, model);
    }
  };
  check("n_head", ops.n_head, "num_attention_heads", m.num_attention_heads);
  check("n_kv_head", ops.n_kv_head, "num_key_value_heads", m.num_kv_heads);
  check("n_embd", ops.n_embd, "hidden_size", m.hidden_size);
  check("n_expanded_embd", ops.n_expanded_embd, "intermediate_size", m.intermediate_size);
  if (!diff.empty()) {
    throw std::invalid_argument(
        fmt::format("{}: the profiled model does not match '{}': {} (a profile is valid only for "
                    "the model it measured)",
                    ops.path, m.name, diff));
  }
}

double efficiency(std::optional<double> given, double fallback, const char* name) {
  const double v = given.value_or(fallback);
  if (!(v >= 0.001 && v <= 1.0)) {
    throw std::invalid_argument(fmt::format("{} must be in [0.001, 1], got {}", name, v));
  }
  return v;
}

}  // namespace

ProfileModelShape profile_model_shape(const ModelSpec& model, int32_t tp,
                                      std::string_view kv_cache_dtype) {
  if (tp < 1) {
    throw std::invalid_argument(fmt::format("tensor parallel size must be >= 1, got {}", tp));
  }
  ProfileModelShape s;
  s.name = model.name;
  s.num_layers = static_cast<int32_t>(model.num_layers);
  s.num_attention_heads = static_cast<int32_t>(model.num_attention_heads);
  s.num_kv_heads = static_cast<int32_t>(model.num_kv_heads);
  s.head_dim = static_cast<int32_t>(model.head_dim);
  s.hidden_size = model.hidden_size;
  s.intermediate_size = model.intermediate_size;
  const std::string kv_dtype = kv_cache_dtype == "auto" ? model.dtype : std::string(kv_cache_dtype);
  const int64_t heads = model.use_mla ? 1 : kv_heads_per_rank(model.num_kv_heads, tp);
  s.kv_bytes_per_token_per_rank = static_cast<double>(page_size_bytes(model, heads, kv_dtype, 1)) *
                                  static_cast<double>(model.num_layers);
  return s;
}

AttentionEfficiency default_attention_efficiency(std::string_view gpu) {
  // mfu: inference-sim's per-card prefill utilisation (calibration/README.md, blis/); mbu: the
  // middle of what paged decode kernels reach (docs/step-time-model.md §profile).
  if (gpu.starts_with("h100") || gpu.starts_with("h200")) return {0.45, 0.7};
  if (gpu.starts_with("a100")) return {0.38, 0.7};
  if (gpu == "l40s") return {0.32, 0.7};
  return {};
}

ProfileStepTime::ProfileStepTime(ProfileModelShape shape, RooflineGpu gpu, int32_t tp,
                                 OperatorProfile ops, std::optional<AllReduceProfile> all_reduce,
                                 ProfileParams params)
    : shape_(std::move(shape)),
      gpu_(std::move(gpu)),
      tp_(tp),
      ops_path_(ops.path),
      all_reduce_path_(all_reduce && tp > 1 ? all_reduce->path : ""),
      max_tokens_(ops.max_tokens),
      layer_ms_(curve_for_tp(ops, tp)),
      all_reduce_ms_(all_reduce_for_tp(all_reduce, tp)) {
  check_shape(ops, shape_);
  if (!(shape_.num_layers > 0 && shape_.head_dim > 0 && shape_.kv_bytes_per_token_per_rank > 0)) {
    throw std::invalid_argument(fmt::format(
        "profile step time: model '{}' needs layers, head_dim and KV bytes > 0", shape_.name));
  }
  if (!(gpu_.peak_flops > 0) || !(gpu_.hbm_bytes_per_s > 0)) {
    throw std::invalid_argument(
        fmt::format("profile step time: GPU '{}' has no peak TFLOP/s or HBM bandwidth", gpu_.name));
  }
  const AttentionEfficiency card = default_attention_efficiency(gpu_.name);
  eff_.mfu = efficiency(params.attn_mfu, card.mfu, "attn_mfu");
  eff_.mbu = efficiency(params.attn_mbu, card.mbu, "attn_mbu");
  if (!(params.overhead_ms >= 0 && params.overhead_ms <= kMaxStepSeconds * 1e3)) {
    throw std::invalid_argument(
        fmt::format("overhead_ms must be in [0, 3.6e6], got {}", params.overhead_ms));
  }
  overhead_ms_ = params.overhead_ms;
}

ProfileStepTime::Terms ProfileStepTime::terms(const StepWork& w) const noexcept {
  Terms t;
  if (w.empty()) return t;
  const auto T = static_cast<double>(w.num_tokens());
  const double L = shape_.num_layers;
  t.layers = L * layer_ms_(T) * kMs;
  if (all_reduce_ms_) {
    const double bytes = T * static_cast<double>(shape_.hidden_size) * 2.0;  // fp16 activations
    t.all_reduce = 2.0 * L * (*all_reduce_ms_)(bytes)*kMs;
  }
  const double pairs =
      static_cast<double>(w.sum_context_x_new) + 0.5 * static_cast<double>(w.sum_new_squared);
  const double flops =
      4.0 * L * (static_cast<double>(shape_.num_attention_heads) / tp_) * shape_.head_dim * pairs;
  t.attn_compute = flops / (gpu_.peak_flops * eff_.mfu);
  const double kv_bytes =
      shape_.kv_bytes_per_token_per_rank * (static_cast<double>(w.sum_context_tokens) + T);
  t.attn_kv = kv_bytes / (gpu_.hbm_bytes_per_s * eff_.mbu);
  return t;
}

StepTimeBreakdown ProfileStepTime::estimate(const StepWork& work) const {
  StepTimeBreakdown b;
  if (work.empty()) return b;
  const Terms t = terms(work);
  b.compute_s = t.layers + t.attn_compute;
  b.memory_s = t.attn_kv;
  b.overhead_s = t.all_reduce + overhead_ms_ * kMs;
  b.total_s = b.compute_s + b.memory_s + b.overhead_s;
  return b;
}

std::string ProfileStepTime::calibration() const {
  return "measured operator tables (linear layers and all-reduce); attention from a model whose "
         "efficiencies are not fitted";
}

std::string ProfileStepTime::describe() const {
  return fmt::format(
      "profile({} on {}, tp={}, operators {} (medians, profiled to {} tokens){}, attention "
      "mfu={} mbu={}, overhead_ms={})",
      shape_.name, gpu_.name, tp_, ops_path_, max_tokens_,
      all_reduce_path_.empty() ? "" : ", all-reduce " + all_reduce_path_, eff_.mfu, eff_.mbu,
      overhead_ms_);
}

std::unique_ptr<StepTimeModel> make_profile_step_time(std::string_view spec, const ModelSpec& model,
                                                      const GpuSpec& gpu, int32_t tp,
                                                      std::string_view kv_cache_dtype) {
  try {
    const std::string_view prefix = "profile:";
    if (!spec.starts_with(prefix) || spec.size() == prefix.size()) {
      throw std::invalid_argument(
          "expected profile:DIR[,all_reduce=FILE][,overhead_ms=X][,attn_mfu=Y][,attn_mbu=Z] "
          "(DIR holding Vidur's mlp.csv, e.g. calibration/vidur/compute/h100/meta-llama/"
          "Llama-2-7b-hf)");
    }
    std::string_view todo = spec.substr(prefix.size());
    const auto first_comma = todo.find(',');
    const std::string dir(todo.substr(0, first_comma));
    todo = first_comma == std::string_view::npos ? std::string_view{} : todo.substr(first_comma);
    if (dir.empty()) throw std::invalid_argument("empty profile directory");
    ProfileParams params;
    std::string all_reduce;
    bool seen[4] = {false, false, false, false};
    while (!todo.empty()) {
      todo.remove_prefix(1);  // the ','
      const auto comma = todo.find(',');
      const std::string_view item = todo.substr(0, comma);
      todo = comma == std::string_view::npos ? std::string_view{} : todo.substr(comma);
      const auto eq = item.find('=');
      if (eq == std::string_view::npos || eq == 0 || eq + 1 == item.size()) {
        throw std::invalid_argument(fmt::format("expected key=value, got '{}'", item));
      }
      const std::string_view key = item.substr(0, eq);
      const std::string_view value = item.substr(eq + 1);
      int index = -1;
      if (key == "all_reduce") {
        index = 0;
        all_reduce = std::string(value);
      } else {
        const auto number = parse_finite_double(value);
        if (!number) throw std::invalid_argument(fmt::format("{}: not a number: '{}'", key, value));
        if (key == "overhead_ms") {
          index = 1;
          params.overhead_ms = *number;
        } else if (key == "attn_mfu") {
          index = 2;
          params.attn_mfu = *number;
        } else if (key == "attn_mbu") {
          index = 3;
          params.attn_mbu = *number;
        } else {
          throw std::invalid_argument(fmt::format(
              "unknown parameter '{}' (expected all_reduce, overhead_ms, attn_mfu, attn_mbu)",
              key));
        }
      }
      if (seen[index]) throw std::invalid_argument(fmt::format("parameter '{}' given twice", key));
      seen[index] = true;
    }
    const bool is_dir = std::filesystem::is_directory(dir);
    if (!is_dir && !std::filesystem::is_regular_file(dir)) {
      throw std::invalid_argument(
          fmt::format("'{}' is neither a directory holding mlp.csv nor an mlp.csv file", dir));
    }
    const std::string mlp = is_dir ? (std::filesystem::path(dir) / "mlp.csv").string() : dir;
    if (all_reduce.empty() && is_dir &&
        std::filesystem::is_regular_file(std::filesystem::path(dir) / "all_reduce.csv")) {
      all_reduce = (std::filesystem::path(dir) / "all_reduce.csv").string();
    }
    std::optional<AllReduceProfile> ar;
    if (!all_reduce.empty()) ar = read_all_reduce_profile(all_reduce);
    return std::make_unique<ProfileStepTime>(
        profile_model_shape(model, tp, kv_cache_dtype),
        RooflineGpu{gpu.name, gpu.peak_bf16_tflops * 1e12, gpu.hbm_gb_per_s * 1e9}, tp,
        read_operator_profile(mlp), std::move(ar), params);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(
        fmt::format("{}: {}", param("step_time", fmt::format("'{}'", spec)), e.what()));
  }
}

}  // namespace kvsim
