#include "kvsim/run/cluster_options.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "kvsim/core/param.h"

namespace kvsim::run {
namespace {

void check_slo(const char* id, const std::optional<double>& v) {
  if (v && !(std::isfinite(*v) && *v > 0)) {
    throw std::invalid_argument(fmt::format("{}: must be a finite number of seconds > 0",
                                            param(id, fmt::format("{}", *v))));
  }
}

}  // namespace

ClusterConfig to_cluster_config(const ClusterOptions& o) {
  ClusterConfig c;
  if (o.replicas < 1 || o.replicas > kMaxClusterReplicas) {
    throw std::invalid_argument(fmt::format("{}: must be in [1, {}]",
                                            param("replicas", std::to_string(o.replicas)),
                                            kMaxClusterReplicas));
  }
  c.replicas = o.replicas;
  try {
    c.router = parse_router_policy(o.router);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: {}", param("router"), e.what()));
  }
  if (!(std::isfinite(o.router_staleness_ms) && o.router_staleness_ms >= 0)) {
    throw std::invalid_argument(
        fmt::format("{}: must be a finite number of milliseconds >= 0",
                    param("router_staleness_ms", fmt::format("{}", o.router_staleness_ms))));
  }
  if (o.router_staleness_ms * 1e6 > static_cast<double>(kMaxArrivalNs)) {
    throw std::invalid_argument(
        fmt::format("{}: longer than the simulated clock's range",
                    param("router_staleness_ms", fmt::format("{}", o.router_staleness_ms))));
  }
  c.router_staleness_ns = std::llround(o.router_staleness_ms * 1e6);
  c.seed = o.router_seed;
  if (o.admission_max_waiting_requests < 0) {
    throw std::invalid_argument(fmt::format(
        "{}: must be >= 0",
        param("admission_max_waiting_requests", std::to_string(o.admission_max_waiting_requests))));
  }
  if (o.admission_max_waiting_tokens < 0) {
    throw std::invalid_argument(fmt::format(
        "{}: must be >= 0",
        param("admission_max_waiting_tokens", std::to_string(o.admission_max_waiting_tokens))));
  }
  c.admission.max_waiting_requests = o.admission_max_waiting_requests;
  c.admission.max_waiting_tokens = o.admission_max_waiting_tokens;
  if (o.affinity_prefix_blocks < 1) {
    throw std::invalid_argument(
        fmt::format("{}: must be >= 1",
                    param("affinity_prefix_blocks", std::to_string(o.affinity_prefix_blocks))));
  }
  if (!(std::isfinite(o.affinity_load_factor) && o.affinity_load_factor >= 1)) {
    throw std::invalid_argument(
        fmt::format("{}: must be >= 1",
                    param("affinity_load_factor", fmt::format("{}", o.affinity_load_factor))));
  }
  if (!(std::isfinite(o.kv_aware_load_weight) && o.kv_aware_load_weight >= 0)) {
    throw std::invalid_argument(
        fmt::format("{}: must be >= 0",
                    param("kv_aware_load_weight", fmt::format("{}", o.kv_aware_load_weight))));
  }
  // A knob of a router other than the chosen one would be ignored silently (a value other than
  // its default is what "given" can mean here: Python passes the same struct).
  const ClusterOptions d;
  const auto needs_router = [&o, &c](const char* id, bool changed, RouterPolicy policy) {
    if (changed && c.router != policy) {
      throw std::invalid_argument(fmt::format("{} needs {} (got {})", param(id),
                                              param("router", to_string(policy)),
                                              param("router", o.router)));
    }
  };
  needs_router("affinity_prefix_blocks", o.affinity_prefix_blocks != d.affinity_prefix_blocks,
               RouterPolicy::PREFIX_AFFINITY);
  needs_router("affinity_load_factor", o.affinity_load_factor != d.affinity_load_factor,
               RouterPolicy::PREFIX_AFFINITY);
  needs_router("kv_aware_load_weight", o.kv_aware_load_weight != d.kv_aware_load_weight,
               RouterPolicy::KV_AWARE);
  c.affinity_prefix_blocks = o.affinity_prefix_blocks;
  c.affinity_load_factor = o.affinity_load_factor;
  c.kv_aware_load_weight = o.kv_aware_load_weight;
  check_slo("slo_ttft_p99", o.slo_ttft_p99);
  check_slo("slo_tpot_p99", o.slo_tpot_p99);
  check_slo("slo_e2e_p99", o.slo_e2e_p99);
  c.slo.ttft_s = o.slo_ttft_p99;
  c.slo.tpot_s = o.slo_tpot_p99;
  c.slo.e2e_s = o.slo_e2e_p99;
  if (o.slo_stop_early) {
    if (c.slo.empty()) {
      throw std::invalid_argument(fmt::format("{} needs an objective ({}, {} or {})",
                                              param("slo_stop_early"), param("slo_ttft_p99"),
                                              param("slo_tpot_p99"), param("slo_e2e_p99")));
    }
    c.stop_when_slo_fails = c.slo;
  }
  return c;
}

}  // namespace kvsim::run
