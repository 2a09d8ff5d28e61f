#include "options.h"

#include <limits>
#include <string>
#include <type_traits>
#include <typeinfo>

#include <fmt/core.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

namespace nb = nanobind;

namespace kvsim::python {
namespace {

// Takes keys out of a copy of the dict; finish() refuses what is left.
class Kwargs {
 public:
  Kwargs(nb::dict d, const char* what) : what_(what) {
    PyObject* copy = PyDict_Copy(d.ptr());
    if (copy == nullptr) throw nb::python_error();
    d_ = nb::steal<nb::dict>(copy);
  }

  template <typename T>
  void take(const char* key, T& into) {
    if (!d_.contains(key)) return;
    into = cast<T>(key, d_[key]);
    nb::del(d_[key]);
  }
  template <typename T>
  void take(const char* key, std::optional<T>& into) {
    if (!d_.contains(key)) return;
    nb::handle v = d_[key];
    if (!v.is_none()) into = cast<T>(key, v);
    nb::del(d_[key]);
  }

  // The Python layer checked the type, so a failed cast is an integer outside the field's
  // range (an int32 setting given 2**40): a ValueError naming the keyword, never std::bad_cast.
  template <typename T>
  static T cast(const char* key, nb::handle v) {
    try {
      return nb::cast<T>(v);
    } catch (const std::bad_cast&) {
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        throw nb::value_error(fmt::format("{} is out of range (expected {} .. {}; got {})", key,
                                          std::numeric_limits<T>::min(),
                                          std::numeric_limits<T>::max(),
                                          nb::cast<std::string>(nb::repr(v)))
                                  .c_str());
      }
      throw nb::type_error(
          fmt::format("{}: unexpected type {}", key, nb::cast<std::string>(nb::repr(v.type())))
              .c_str());
    }
  }

  void finish() const {
    for (auto [key, value] : d_) {
      (void)value;
      throw nb::type_error(
          (std::string(what_) + ": unexpected option '" + nb::cast<std::string>(nb::str(key)) + "'")
              .c_str());
    }
  }

 private:
  nb::dict d_;
  const char* what_;
};

}  // namespace

run::PlanOptions plan_options_from(nb::dict kwargs) {
  Kwargs k(kwargs, "model/card options");
  run::PlanOptions o;
  k.take("model", o.model);
  k.take("config", o.config_path);
  k.take("num_layers", o.num_layers);
  k.take("num_kv_heads", o.num_kv_heads);
  k.take("head_dim", o.head_dim);
  k.take("num_params", o.num_params);
  k.take("dtype", o.dtype);
  k.take("gpu", o.gpu);
  k.take("vram_gib", o.vram_gib);
  k.take("gpu_spec", o.gpu_spec_path);
  k.take("gpu_memory_utilization", o.gpu_memory_utilization);
  k.take("overhead_gib", o.overhead_gib);
  k.take("weights_gib", o.weights_gib);
  k.take("quantization", o.quantization);
  k.take("kv_cache_dtype", o.kv_cache_dtype);
  k.take("tensor_parallel_size", o.tensor_parallel_size);
  k.take("max_model_len", o.max_model_len);
  k.take("block_size", o.block_size);
  k.take("num_gpu_blocks_override", o.num_gpu_blocks_override);
  k.take("kv_cache_memory_bytes", o.kv_cache_memory_bytes);
  k.take("disable_hybrid_kv_cache_manager", o.disable_hybrid_kv_cache_manager);
  k.finish();
  return o;
}

run::SchedulerOptions scheduler_options_from(nb::dict kwargs) {
  Kwargs k(kwargs, "scheduler options");
  run::SchedulerOptions o;
  k.take("long_prefill_token_threshold", o.long_prefill_token_threshold);
  k.take("enable_chunked_prefill", o.enable_chunked_prefill);
  k.take("enable_prefix_caching", o.enable_prefix_caching);
  k.take("scheduling_policy", o.policy);
  k.take("watermark", o.watermark);
  k.take("scheduler_reserve_full_isl", o.scheduler_reserve_full_isl);
  k.take("num_lookahead_tokens", o.num_lookahead_tokens);
  k.take("step_time", o.step_time);
  k.take("async_scheduling", o.async_scheduling);
  k.finish();
  return o;
}

TraceReadOptions trace_options_from(nb::dict kwargs) {
  Kwargs k(kwargs, "trace options");
  TraceReadOptions o;
  std::string format = "auto", arrival = "trace";
  k.take("format", format);
  k.take("arrival", arrival);
  o.format = parse_trace_format(format);
  o.arrival = parse_arrival_mode(arrival);
  k.take("max_requests", o.max_requests);
  k.take("start", o.start_s);
  k.take("duration", o.duration_s);
  k.take("time_scale", o.time_scale);
  k.take("rate", o.rate);
  k.take("seed", o.seed);
  k.take("skip_bad_rows", o.skip_bad_rows);
  k.take("max_input_bytes", o.limits.max_bytes);
  k.take("max_line_bytes", o.limits.max_line_bytes);
  k.take("hash_block_size", o.hash_block_size);
  k.finish();
  return o;
}

void take_replay_options(nb::dict kwargs, run::ReplayOptions& o) {
  Kwargs k(kwargs, "replay options");
  k.take("max_num_batched_tokens", o.max_num_batched_tokens);
  k.take("max_num_seqs", o.max_num_seqs);
  k.take("backend", o.backend);
  k.take("backend_max_layers", o.backend_max_layers);
  k.take("preemption_mode", o.preemption_mode);
  k.take("swap_space_gib", o.swap_space_gib);
  k.take("swap_bandwidth_gbps", o.swap_bandwidth_gbps);
  k.take("check_invariants", o.check_invariants);
  k.take("timeline", o.record_timeline);
  k.take("requests", o.record_requests);
  k.finish();
}

run::ClusterOptions cluster_options_from(nb::dict kwargs) {
  Kwargs k(kwargs, "cluster options");
  run::ClusterOptions o;
  k.take("replicas", o.replicas);
  k.take("router", o.router);
  k.take("router_staleness_ms", o.router_staleness_ms);
  k.take("router_seed", o.router_seed);
  k.take("affinity_prefix_blocks", o.affinity_prefix_blocks);
  k.take("affinity_load_factor", o.affinity_load_factor);
  k.take("kv_aware_load_weight", o.kv_aware_load_weight);
  k.take("admission_max_waiting_requests", o.admission_max_waiting_requests);
  k.take("admission_max_waiting_tokens", o.admission_max_waiting_tokens);
  k.take("slo_ttft_p99", o.slo_ttft_p99);
  k.take("slo_tpot_p99", o.slo_tpot_p99);
  k.take("slo_e2e_p99", o.slo_e2e_p99);
  k.take("slo_stop_early", o.slo_stop_early);
  k.finish();
  return o;
}

}  // namespace kvsim::python
