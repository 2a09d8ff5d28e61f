// The JSON summary, human report and CSVs of a cluster replay.
#include "kvsim/sim/report/cluster_report.h"

#include <fmt/format.h>

#include "report_csv_rows.h"

namespace kvsim {
namespace {

// Keys of replay_summary_json that describe the run's inputs, not one replica.
constexpr const char* kContextKeys[] = {
    "trace", "format", "rows_read",   "rows_dropped", "rows_dropped_by_reason",
    "model", "gpu",    "wall_seconds"};

std::string describe_admission(const ClusterConfig& c) {
  const AdmissionControl& a = c.admission;
  if (a.max_waiting_requests == 0 && a.max_waiting_tokens == 0) return "off";
  std::string out;
  if (a.max_waiting_requests > 0)
    out += fmt::format("at most {} queued requests", a.max_waiting_requests);
  if (a.max_waiting_tokens > 0) {
    out += fmt::format("{}at most {} queued prompt tokens", out.empty() ? "" : ", ",
                       a.max_waiting_tokens);
  }
  return out + " per replica";
}

std::string describe_slo(const SloSpec& s) {
  std::string out;
  auto add = [&out](const char* name, const std::optional<double>& v) {
    if (v) out += fmt::format("{}{} p99 <= {} s", out.empty() ? "" : ", ", name, *v);
  };
  add("TTFT", s.ttft_s);
  add("TPOT", s.tpot_s);
  add("e2e", s.e2e_s);
  return out;
}

nlohmann::ordered_json per_replica_json(const ReplaySummary& s, int32_t replica,
                                        const ReportContext& ctx) {
  nlohmann::ordered_json j;
  j["replica"] = replica;
  nlohmann::ordered_json full = replay_summary_json(s, ctx);
  for (const char* key : kContextKeys) full.erase(key);
  for (auto& [key, value] : full.items()) j[key] = value;
  return j;
}

}  // namespace

nlohmann::ordered_json cluster_summary_json(const ClusterResult& r, const ClusterConfig& cluster,
                                            const ReportContext& ctx) {
  nlohmann::ordered_json j = replay_summary_json(r.cluster.summary, ctx);
  j.erase("wall_seconds");
  j["replicas"] = cluster.replicas;
  j["router"] = std::string(to_string(cluster.router));
  j["router_staleness_ms"] = static_cast<double>(cluster.router_staleness_ns) / 1e6;
  j["router_seed"] = cluster.seed;
  j["admission_max_waiting_requests"] = cluster.admission.max_waiting_requests;
  j["admission_max_waiting_tokens"] = cluster.admission.max_waiting_tokens;
  j["admission_rejected"] = r.admission_rejected;
  nlohmann::ordered_json by_reason = nlohmann::ordered_json::object();
  for (int i = 1; i < kNumAdmissionRejectReasons; ++i) {
    by_reason[std::string(to_string(static_cast<AdmissionRejectReason>(i)))] =
        r.admission_rejected_by_reason[static_cast<size_t>(i)];
  }
  j["admission_rejected_by_reason"] = by_reason;
  j["stopped_early"] = r.stopped_early;
  if (!cluster.slo.empty()) {
    nlohmann::ordered_json slo;
    auto threshold = [&slo](const char* key, const std::optional<double>& v) {
      slo[key] = v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
    };
    threshold("ttft_p99_s", cluster.slo.ttft_s);
    threshold("tpot_p99_s", cluster.slo.tpot_s);
    threshold("e2e_p99_s", cluster.slo.e2e_s);
    slo["met"] = r.slo.met;
    slo["attainment"] = r.slo.attainment;
    slo["goodput_rps"] = r.slo.goodput_rps;
    slo["p99_verdict"] = r.slo.p99_verdict;
    slo["ttft_violations"] = r.slo.ttft_violations;
    slo["tpot_violations"] = r.slo.tpot_violations;
    slo["e2e_violations"] = r.slo.e2e_violations;
    j["slo"] = std::move(slo);
  }
  nlohmann::ordered_json replicas = nlohmann::ordered_json::array();
  for (size_t i = 0; i < r.per_replica.size(); ++i) {
    replicas.push_back(per_replica_json(r.per_replica[i], static_cast<int32_t>(i), ctx));
  }
  j["per_replica"] = std::move(replicas);
  j["wall_seconds"] = r.cluster.summary.wall_seconds;  // last, as in the single-replica JSON
  return j;
}

std::string format_cluster_report(const ClusterResult& r, const ClusterConfig& cluster,
                                  const ReportContext& ctx) {
  std::string o = format_replay_report(r.cluster.summary, ctx);
  auto out = std::back_inserter(o);
  fmt::format_to(out, "\nCluster: {} replicas, router {} (load seen {}{}), admission control {}\n",
                 cluster.replicas, to_string(cluster.router),
                 cluster.router_staleness_ns > 0
                     ? fmt::format("as scraped every {} ms",
                                   static_cast<double>(cluster.router_staleness_ns) / 1e6)
                     : std::string("live"),
                 cluster.router == RouterPolicy::RANDOM ||
                         cluster.router == RouterPolicy::POWER_OF_TWO ||
                         cluster.router == RouterPolicy::PREFIX_AFFINITY
                     ? fmt::format(", seed {}", cluster.seed)
                     : std::string(),
                 describe_admission(cluster));
  if (r.admission_rejected > 0) {
    fmt::format_to(
        out, "  refused at admission: {} ({} queue full, {} token limit)\n", r.admission_rejected,
        r.admission_rejected_by_reason[static_cast<size_t>(AdmissionRejectReason::QUEUE_FULL)],
        r.admission_rejected_by_reason[static_cast<size_t>(AdmissionRejectReason::TOKEN_LIMIT)]);
  }
  fmt::format_to(out,
                 "  the cluster lines above pool all replicas: counts summed, concurrency and KV "
                 "usage per replica-step, latencies over all requests\n");
  fmt::format_to(out,
                 "  {:>3} {:>8} {:>8} {:>6} {:>6} {:>7} {:>6} {:>6} {:>7} {:>7} {:>7} {:>8} {:>8} "
                 "{:>8} {:>8} {:>8} {:>8}\n",
                 "rep", "requests", "finished", "mean", "p99", "formula", "kv%", "kvpk%", "pad%",
                 "preempt", "hit%", "ttft50", "ttft99", "tpot50", "tpot99", "e2e50", "e2e99");
  for (size_t i = 0; i < r.per_replica.size(); ++i) {
    const ReplaySummary& s = r.per_replica[i];
    fmt::format_to(out,
                   "  {:>3} {:>8} {:>8} {:>6.2f} {:>6} {:>7} {:>6.1f} {:>6.1f} {:>7.2f} {:>7} "
                   "{:>7.2f} {:>8.3f} {:>8.3f} {:>8.4f} {:>8.4f} {:>8.3f} {:>8.3f}\n",
                   i, s.requests, s.finished, s.mean_running, s.p99_running,
                   ctx.formula_max_concurrency, 100.0 * s.mean_kv_usage, 100.0 * s.peak_kv_usage,
                   100.0 * s.padding_fraction_mean, s.preemptions,
                   100.0 * s.admission_prefix_hit_rate, s.latency.ttft.p50, s.latency.ttft.p99,
                   s.latency.tpot.p50, s.latency.tpot.p99, s.latency.e2e.p50, s.latency.e2e.p99);
  }
  fmt::format_to(out,
                 "  (mean/p99: running requests per step; formula: the lesson's N_seq per "
                 "replica; hit%: admitted tokens served from the prefix cache)\n");
  if (!cluster.slo.empty()) {
    const SloReport& s = r.slo;
    fmt::format_to(out, "\nSLO: {}\n", describe_slo(cluster.slo));
    fmt::format_to(out,
                   "  attainment {:.2f}% ({} of {} requests met every objective), goodput "
                   "{:.3f} requests/s\n",
                   100.0 * s.attainment, s.met, r.cluster.summary.requests, s.goodput_rps);
    fmt::format_to(out,
                   "  p99 verdict: {} (violations: TTFT {}, TPOT {}, e2e {}; rejected requests "
                   "count as violations)\n",
                   s.p99_verdict ? "PASS" : "FAIL", s.ttft_violations, s.tpot_violations,
                   s.e2e_violations);
  }
  if (r.stopped_early) {
    fmt::format_to(out,
                   "\nstopped early: the p99 verdict was decided \"fail\" at t = {:.3f} s; the "
                   "numbers above cover the replay up to there\n",
                   static_cast<double>(r.cluster.summary.sim_ns) / 1e9);
  }
  return o;
}

void write_cluster_timeline_csv(std::ostream& os, std::span<const TimelineRow> rows,
                                std::span<const int32_t> replica) {
  os << "replica," << detail::kTimelineCsvHeader << "\n";
  fmt::memory_buffer buf;
  detail::TimelineRowFormatter formatter;
  for (size_t i = 0; i < rows.size(); ++i) {
    char* p = detail::put_int(detail::begin_row(buf), i < replica.size() ? replica[i] : 0);
    *p++ = ',';
    detail::end_row(buf, formatter.put(p, rows[i]));
    detail::flush_csv(os, buf);
  }
  detail::flush_csv(os, buf, /*force=*/true);
}

void write_cluster_requests_csv(std::ostream& os, std::span<const RequestRecord> records,
                                std::span<const int32_t> request_replica,
                                std::span<const AdmissionRejectReason> admission_reason) {
  os << "replica," << detail::kRequestsCsvHeader << "\n";
  fmt::memory_buffer buf;
  for (size_t i = 0; i < records.size(); ++i) {
    const RequestRecord& r = records[i];
    const AdmissionRejectReason why =
        i < admission_reason.size() ? admission_reason[i] : AdmissionRejectReason::NONE;
    std::string_view reason;
    if (why != AdmissionRejectReason::NONE) {
      reason = to_string(why);
    } else if (r.rejected) {
      reason = to_string(r.reject_reason);
    }
    char* p = detail::put_int(detail::begin_row(buf),
                              i < request_replica.size() ? request_replica[i] : kNotRouted);
    *p++ = ',';
    detail::end_row(buf, detail::put_request_row(p, r, reason));
    detail::flush_csv(os, buf);
  }
  detail::flush_csv(os, buf, /*force=*/true);
}

}  // namespace kvsim
