#include "cluster_options.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "validators.h"

namespace kvsim::cli {
namespace {

void check_slo_flag(const char* flag, const std::optional<double>& v) {
  if (v && !(std::isfinite(*v) && *v > 0)) {
    throw std::invalid_argument(
        fmt::format("{} {}: must be a finite number of seconds > 0", flag, *v));
  }
}

}  // namespace

void add_router_options(CLI::App& app, ClusterOptions& o) {
  const char* group = "Cluster";
  app.add_option("--router", o.router,
                 "Routing policy: round-robin | random | least-outstanding | least-kv | "
                 "power-of-two | prefix-affinity | kv-aware")
      ->capture_default_str()
      ->group(group);
  app.add_option("--router-staleness-ms", o.router_staleness_ms,
                 "The router sees replica load as scraped every MS milliseconds (0 = live)")
      ->capture_default_str()
      ->group(group);
  app.add_option_function<std::string>(
         "--router-seed",
         [&o](const std::string& s) { o.router_seed = parse_u64("--router-seed", s); },
         "Seed of the random, power-of-two and prefix-affinity routers, 0 .. 2^64-1")
      ->default_str("0")
      ->group(group);
  app.add_option("--affinity-prefix-blocks", o.affinity_prefix_blocks,
                 "prefix-affinity: hash the first this many prompt blocks")
      ->capture_default_str()
      ->group(group);
  app.add_option("--affinity-load-factor", o.affinity_load_factor,
                 "prefix-affinity: a replica takes at most this factor times the mean load")
      ->capture_default_str()
      ->group(group);
  app.add_option("--kv-aware-load-weight", o.kv_aware_load_weight,
                 "kv-aware: weight of load against the cached-prefix share")
      ->capture_default_str()
      ->group(group);
  app.add_option("--admission-max-waiting-requests", o.admission_max_waiting_requests,
                 "Refuse a request that would queue behind this many in its replica (0 = off)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--admission-max-waiting-tokens", o.admission_max_waiting_tokens,
                 "Refuse a request whose replica would queue more prompt tokens (0 = off)")
      ->capture_default_str()
      ->group(group);
}

void add_slo_options(CLI::App& app, ClusterOptions& o) {
  const char* group = "SLO";
  app.add_option("--slo-ttft-p99", o.slo_ttft_p99, "TTFT p99 objective, seconds")->group(group);
  app.add_option("--slo-tpot-p99", o.slo_tpot_p99, "TPOT p99 objective, seconds")->group(group);
  app.add_option("--slo-e2e-p99", o.slo_e2e_p99, "End-to-end p99 objective, seconds")->group(group);
}

void add_cluster_options(CLI::App& app, ClusterOptions& o) {
  app.add_option("--replicas", o.replicas, "Engine replicas behind the router")
      ->capture_default_str()
      ->group("Cluster");
  add_router_options(app, o);
  add_slo_options(app, o);
  app.add_flag("--slo-stop-early", o.slo_stop_early,
               "Stop the replay once the SLO's p99 verdict is decided \"fail\"")
      ->group("SLO");
}

ClusterConfig to_cluster_config(const ClusterOptions& o) {
  ClusterConfig c;
  if (o.replicas < 1 || o.replicas > kMaxClusterReplicas) {
    throw std::invalid_argument(
        fmt::format("--replicas {}: must be in [1, {}]", o.replicas, kMaxClusterReplicas));
  }
  c.replicas = o.replicas;
  try {
    c.router = parse_router_policy(o.router);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("--router: {}", e.what()));
  }
  if (!(std::isfinite(o.router_staleness_ms) && o.router_staleness_ms >= 0)) {
    throw std::invalid_argument(
        fmt::format("--router-staleness-ms {}: must be a finite number of milliseconds >= 0",
                    o.router_staleness_ms));
  }
  if (o.router_staleness_ms * 1e6 > static_cast<double>(kMaxArrivalNs)) {
    throw std::invalid_argument(
        fmt::format("--router-staleness-ms {}: longer than the simulated clock's range",
                    o.router_staleness_ms));
  }
  c.router_staleness_ns = std::llround(o.router_staleness_ms * 1e6);
  c.seed = o.router_seed;
  if (o.admission_max_waiting_requests < 0) {
    throw std::invalid_argument(fmt::format("--admission-max-waiting-requests {}: must be >= 0",
                                            o.admission_max_waiting_requests));
  }
  if (o.admission_max_waiting_tokens < 0) {
    throw std::invalid_argument(fmt::format("--admission-max-waiting-tokens {}: must be >= 0",
                                            o.admission_max_waiting_tokens));
  }
  c.admission.max_waiting_requests = o.admission_max_waiting_requests;
  c.admission.max_waiting_tokens = o.admission_max_waiting_tokens;
  if (o.affinity_prefix_blocks < 1) {
    throw std::invalid_argument(
        fmt::format("--affinity-prefix-blocks {}: must be >= 1", o.affinity_prefix_blocks));
  }
  if (!(std::isfinite(o.affinity_load_factor) && o.affinity_load_factor >= 1)) {
    throw std::invalid_argument(
        fmt::format("--affinity-load-factor {}: must be >= 1", o.affinity_load_factor));
  }
  if (!(std::isfinite(o.kv_aware_load_weight) && o.kv_aware_load_weight >= 0)) {
    throw std::invalid_argument(
        fmt::format("--kv-aware-load-weight {}: must be >= 0", o.kv_aware_load_weight));
  }
  // A knob of a router other than the chosen one would be ignored silently (a value other than
  // its default is what "given" can mean here: Python passes the same struct).
  const ClusterOptions d;
  const auto needs_router = [&o, &c](const char* flag, bool changed, RouterPolicy policy) {
    if (changed && c.router != policy) {
      throw std::invalid_argument(
          fmt::format("{} needs --router {} (got --router {})", flag, to_string(policy), o.router));
    }
  };
  needs_router("--affinity-prefix-blocks", o.affinity_prefix_blocks != d.affinity_prefix_blocks,
               RouterPolicy::PREFIX_AFFINITY);
  needs_router("--affinity-load-factor", o.affinity_load_factor != d.affinity_load_factor,
               RouterPolicy::PREFIX_AFFINITY);
  needs_router("--kv-aware-load-weight", o.kv_aware_load_weight != d.kv_aware_load_weight,
               RouterPolicy::KV_AWARE);
  c.affinity_prefix_blocks = o.affinity_prefix_blocks;
  c.affinity_load_factor = o.affinity_load_factor;
  c.kv_aware_load_weight = o.kv_aware_load_weight;
  check_slo_flag("--slo-ttft-p99", o.slo_ttft_p99);
  check_slo_flag("--slo-tpot-p99", o.slo_tpot_p99);
  check_slo_flag("--slo-e2e-p99", o.slo_e2e_p99);
  c.slo.ttft_s = o.slo_ttft_p99;
  c.slo.tpot_s = o.slo_tpot_p99;
  c.slo.e2e_s = o.slo_e2e_p99;
  if (o.slo_stop_early) {
    if (c.slo.empty()) {
      throw std::invalid_argument(
          "--slo-stop-early needs an objective (--slo-ttft-p99, --slo-tpot-p99 or --slo-e2e-p99)");
    }
    c.stop_when_slo_fails = c.slo;
  }
  return c;
}

std::string cluster_flags(const ClusterConfig& c) {
  const ClusterConfig d;
  std::string out;
  auto add = [&out](std::string_view flag, const std::string& value) {
    out += fmt::format(" {} {}", flag, value);
  };
  if (c.replicas != d.replicas) add("--replicas", std::to_string(c.replicas));
  if (c.router != d.router) add("--router", std::string(to_string(c.router)));
  if (c.router_staleness_ns != d.router_staleness_ns) {
    add("--router-staleness-ms",
        fmt::format("{}", static_cast<double>(c.router_staleness_ns) / 1e6));
  }
  if (c.seed != d.seed) add("--router-seed", std::to_string(c.seed));
  if (c.affinity_prefix_blocks != d.affinity_prefix_blocks) {
    add("--affinity-prefix-blocks", std::to_string(c.affinity_prefix_blocks));
  }
  if (c.affinity_load_factor != d.affinity_load_factor) {
    add("--affinity-load-factor", fmt::format("{}", c.affinity_load_factor));
  }
  if (c.kv_aware_load_weight != d.kv_aware_load_weight) {
    add("--kv-aware-load-weight", fmt::format("{}", c.kv_aware_load_weight));
  }
  if (c.admission.max_waiting_requests != 0) {
    add("--admission-max-waiting-requests", std::to_string(c.admission.max_waiting_requests));
  }
  if (c.admission.max_waiting_tokens != 0) {
    add("--admission-max-waiting-tokens", std::to_string(c.admission.max_waiting_tokens));
  }
  if (c.slo.ttft_s) add("--slo-ttft-p99", fmt::format("{}", *c.slo.ttft_s));
  if (c.slo.tpot_s) add("--slo-tpot-p99", fmt::format("{}", *c.slo.tpot_s));
  if (c.slo.e2e_s) add("--slo-e2e-p99", fmt::format("{}", *c.slo.e2e_s));
  if (c.stop_when_slo_fails) out += " --slo-stop-early";
  return out;
}

}  // namespace kvsim::cli
