#include "cluster_flags.h"

#include <string>

#include "validators.h"

namespace kvsim::cli {

void add_router_options(CLI::App& app, run::ClusterOptions& o) {
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

void add_slo_options(CLI::App& app, run::ClusterOptions& o) {
  const char* group = "SLO";
  app.add_option("--slo-ttft-p99", o.slo_ttft_p99, "TTFT p99 objective, seconds")->group(group);
  app.add_option("--slo-tpot-p99", o.slo_tpot_p99, "TPOT p99 objective, seconds")->group(group);
  app.add_option("--slo-e2e-p99", o.slo_e2e_p99, "End-to-end p99 objective, seconds")->group(group);
}

void add_cluster_options(CLI::App& app, run::ClusterOptions& o) {
  app.add_option("--replicas", o.replicas, "Engine replicas behind the router")
      ->capture_default_str()
      ->group("Cluster");
  add_router_options(app, o);
  add_slo_options(app, o);
  app.add_flag("--slo-stop-early", o.slo_stop_early,
               "Stop the replay once the SLO's p99 verdict is decided \"fail\"")
      ->group("SLO");
}

bool cluster_flags_given(const CLI::App& cmd) {
  for (const CLI::Option* opt : cmd.get_options()) {
    const std::string group = opt->get_group();
    if ((group == "Cluster" || group == "SLO") && opt->count() > 0) return true;
  }
  return false;
}

}  // namespace kvsim::cli
