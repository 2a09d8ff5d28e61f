// run_cluster_replay: N ReplicaEngines on one event clock, fed by a router (cluster_replay.h).
#include "kvsim/sim/cluster/cluster_replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "kvsim/sim/cluster/cluster_summary.h"
#include "kvsim/sim/cluster/replica_snapshot.h"
#include "kvsim/sim/cluster/router.h"
#include "kvsim/sim/cluster/slo.h"
#include "kvsim/sim/engine/replica_engine.h"

namespace kvsim {

std::string_view to_string(AdmissionRejectReason r) {
  switch (r) {
    case AdmissionRejectReason::NONE:
      return "none";
    case AdmissionRejectReason::QUEUE_FULL:
      return "admission_queue_full";
    case AdmissionRejectReason::TOKEN_LIMIT:
      return "admission_token_limit";
  }
  return "unknown";
}

namespace {

void check_slo(const SloSpec& slo, std::string_view what) {
  const std::pair<const std::optional<double>*, const char*> fields[] = {
      {&slo.ttft_s, "ttft_s"}, {&slo.tpot_s, "tpot_s"}, {&slo.e2e_s, "e2e_s"}};
  for (const auto& [value, name] : fields) {
    if (*value && !(std::isfinite(**value) && **value > 0)) {
      throw std::invalid_argument(fmt::format(
          "cluster: {}.{} must be a finite number of seconds > 0 (got {})", what, name, **value));
    }
  }
}

class EngineProbe final : public PrefixProbe {
 public:
  explicit EngineProbe(const std::vector<std::unique_ptr<ReplicaEngine>>& engines)
      : engines_(engines) {}
  int32_t cached_prefix_tokens(int32_t replica, const Request& r) const override {
    return engines_[static_cast<size_t>(replica)]->cached_prefix_tokens(r);
  }

 private:
  const std::vector<std::unique_ptr<ReplicaEngine>>& engines_;
};

}  // namespace

void check_cluster_config(const ClusterConfig& c) {
  if (c.replicas < 1 || c.replicas > kMaxClusterReplicas) {
    throw std::invalid_argument(fmt::format("cluster: replicas must be in [1, {}] (got {})",
                                            kMaxClusterReplicas, c.replicas));
  }
  if (static_cast<int>(c.router) >= kNumRouterPolicies) {
    throw std::invalid_argument(
        fmt::format("cluster: unknown router policy {}", static_cast<int>(c.router)));
  }
  if (c.router_staleness_ns < 0) {
    throw std::invalid_argument(
        fmt::format("cluster: router_staleness_ns must be >= 0 (got {})", c.router_staleness_ns));
  }
  if (c.admission.max_waiting_requests < 0 || c.admission.max_waiting_tokens < 0) {
    throw std::invalid_argument(fmt::format(
        "cluster: admission limits must be >= 0, 0 = unlimited (got {} requests, {} tokens)",
        c.admission.max_waiting_requests, c.admission.max_waiting_tokens));
  }
  if (c.affinity_prefix_blocks < 1) {
    throw std::invalid_argument(fmt::format("cluster: affinity_prefix_blocks must be >= 1 (got {})",
                                            c.affinity_prefix_blocks));
  }
  if (!(std::isfinite(c.affinity_load_factor) && c.affinity_load_factor >= 1.0)) {
    throw std::invalid_argument(
        fmt::format("cluster: affinity_load_factor must be a finite number >= 1 (got {})",
                    c.affinity_load_factor));
  }
  if (!(std::isfinite(c.kv_aware_load_weight) && c.kv_aware_load_weight >= 0.0)) {
    throw std::invalid_argument(
        fmt::format("cluster: kv_aware_load_weight must be a finite number >= 0 (got {})",
                    c.kv_aware_load_weight));
  }
  check_slo(c.slo, "slo");
  if (c.stop_when_slo_fails) check_slo(*c.stop_when_slo_fails, "stop_when_slo_fails");
}

ClusterResult run_cluster_replay(const ReplayConfig& config, const ClusterConfig& cluster,
                                 const Trace& trace, const ReplicaBackendFactory& backends,
                                 const StepTimeModel& step_time, const ProgressCallback& progress) {
  check_cluster_config(cluster);
  if (config.timeline_sink != nullptr || config.request_sink != nullptr) {
    throw std::invalid_argument(
        "cluster: the replicas' timelines and records are merged at the end; a cluster replay "
        "takes no timeline or request sink");
  }
  const auto wall_start = std::chrono::steady_clock::now();
  const auto num_replicas = static_cast<size_t>(cluster.replicas);
  std::vector<std::unique_ptr<KvBackend>> owned_backends;
  owned_backends.reserve(num_replicas);
  for (size_t i = 0; i < num_replicas; ++i) {
    std::unique_ptr<KvBackend> b = backends ? backends(static_cast<int32_t>(i)) : nullptr;
    if (!b) b = std::make_unique<NullKvBackend>();
    check_replay_config(config, *b);
    owned_backends.push_back(std::move(b));
  }
  ReplayRequests reqs = make_replay_requests(trace);
  std::vector<std::unique_ptr<ReplicaEngine>> engines;
  engines.reserve(num_replicas);
  for (size_t i = 0; i < num_replicas; ++i) {
    engines.push_back(std::make_unique<ReplicaEngine>(config, *owned_backends[i], step_time, reqs));
  }
  const std::unique_ptr<Router> router = make_router(cluster);
  const EngineProbe probe(engines);
  ReplicaSnapshots snapshots(cluster.replicas, cluster.router_staleness_ns, [&](int32_t i) {
    const ReplicaEngine& e = *engines[static_cast<size_t>(i)];
    return ReplicaView{e.num_outstanding(), e.num_queued(), e.num_queued_tokens(), e.kv_usage()};
  });
  std::optional<SloFailDetector> detector;
  std::vector<int64_t> done_log;
  if (cluster.stop_when_slo_fails && !cluster.stop_when_slo_fails->empty()) {
    detector.emplace(*cluster.stop_when_slo_fails, reqs.records);
    for (auto& e : engines) e->set_done_log(&done_log);
  }

  ClusterResult result;
  const size_t n = reqs.requests.size();
  const auto total = static_cast<int64_t>(n);
  result.request_replica.assign(n, kNotRouted);
  result.admission_reason.assign(n, AdmissionRejectReason::NONE);
  const SchedulerConfig& sc = config.scheduler;
  const AdmissionControl& adm = cluster.admission;
  int64_t last_routed_arrival = 0;

  auto route = [&](size_t i) {
    Request& r = reqs.requests[i];
    last_routed_arrival = r.arrival_time_ns;
    int32_t chosen = 0;
    std::span<const ReplicaView> views = snapshots.views();
    if (router->needs_block_hashes() && r.hash_block_size == 0) {
      if (sc.enable_prefix_caching) {
        // The scheduler would hash the prompt at add_request; doing it now is the same hashing
        // (add_request skips a request that already has it).
        r.enable_block_hashing(sc.block_size);
        chosen = router->route(r, views, probe);
      } else {
        Request keyed = r;  // no cache to look up: hash a copy only for the routing key
        keyed.enable_block_hashing(sc.block_size);
        chosen = router->route(keyed, views, probe);
      }
    } else {
      chosen = router->route(r, views, probe);
    }
    const ReplicaView& v = views[static_cast<size_t>(chosen)];
    AdmissionRejectReason why = AdmissionRejectReason::NONE;
    if (adm.max_waiting_requests > 0 && v.queued_requests + 1 > adm.max_waiting_requests) {
      why = AdmissionRejectReason::QUEUE_FULL;
    } else if (adm.max_waiting_tokens > 0 &&
               v.queued_tokens + r.num_prompt_tokens > adm.max_waiting_tokens) {
      why = AdmissionRejectReason::TOKEN_LIMIT;
    }
    if (why != AdmissionRejectReason::NONE) {
      RequestRecord& rec = reqs.records[i];
      rec.rejected = true;
      r.status = RequestStatus::FINISHED_ABORTED;
      r.release_block_hashes();
      result.request_replica[i] = kRefusedByAdmission;
      result.admission_reason[i] = why;
      result.admission_rejected += 1;
      result.admission_rejected_by_reason[static_cast<size_t>(why)] += 1;
      if (detector) detector->on_done(static_cast<int64_t>(i));
      return;
    }
    result.request_replica[i] = chosen;
    engines[static_cast<size_t>(chosen)]->add_request(static_cast<int64_t>(i));
    snapshots.on_routed(chosen, r.num_prompt_tokens);
  };

  auto done_count = [&] {
    int64_t done = result.admission_rejected;
    for (const auto& e : engines) done += e->num_done();
    return done;
  };

  size_t next = 0;
  int64_t steps = 0;
  int64_t next_progress = config.progress_every_steps;
  int64_t now = 0;
  while (true) {
    // The earliest replica event; the lowest index at equal times.
    size_t stepper = num_replicas;
    int64_t t_replica = ReplicaEngine::kNoEvent;
    for (size_t i = 0; i < num_replicas; ++i) {
      const int64_t t = engines[i]->next_event_ns();
      if (t < t_replica) {
        t_replica = t;
        stepper = i;
      }
    }
    const bool arrival_first = next < n && reqs.requests[next].arrival_time_ns <= t_replica;
    if (!arrival_first && stepper == num_replicas) break;  // no arrival left, all idle
    now = arrival_first ? reqs.requests[next].arrival_time_ns : t_replica;
    snapshots.before_event(now);
    if (detector) {
      detector->on_time(now, static_cast<int64_t>(next));
      if (detector->failed()) break;
    }
    if (arrival_first) {
      route(next++);
    } else {
      engines[stepper]->step();
      ++steps;
      if (detector) {
        for (int64_t id : done_log) detector->on_done(id);
        done_log.clear();
      }
      if (progress && steps >= next_progress) {
        next_progress += config.progress_every_steps;
        progress(done_count(), total, now);
      }
    }
    if (detector && detector->failed()) break;
  }
  result.stopped_early = detector && detector->failed();

  // Results: per replica, then the cluster pooled over replicas.
  std::vector<ReplayStepSums> sums;
  sums.reserve(num_replicas);
  result.per_replica.reserve(num_replicas);
  for (auto& e : engines) {
    e->finish();
    result.per_replica.push_back(e->summary());
    sums.push_back(e->step_sums());
  }
  ReplaySummary& c = result.cluster.summary;
  c = merge_replica_summaries(result.per_replica, sums);
  c.requests = total;
  c.rejected += result.admission_rejected;
  c.sim_ns = std::max(c.sim_ns, last_routed_arrival);
  LatencyCollector latency;
  latency.reserve(n);
  for (const RequestRecord& rec : reqs.records) {
    if (!rec.finished) continue;
    latency.add({rec.arrival_ns, rec.first_scheduled_ns, rec.first_token_ns, rec.finish_ns,
                 rec.output_tokens});
  }
  c.latency = latency.report();
  if (!cluster.slo.empty()) result.slo = compute_slo_report(cluster.slo, reqs.records, c.sim_ns);

  if (config.record_timeline) {
    if (num_replicas == 1) {
      result.cluster.timeline = std::move(engines[0]->timeline());
      result.timeline_replica.assign(result.cluster.timeline.size(), 0);
    } else {
      // Merged by step start time, replicas in index order at equal times (each replica's rows
      // are already in time order).
      struct Ref {
        int64_t time_ns;
        int32_t replica;
        size_t row;
      };
      std::vector<Ref> refs;
      for (size_t i = 0; i < num_replicas; ++i) {
        const std::vector<TimelineRow>& rows = engines[i]->timeline();
        for (size_t k = 0; k < rows.size(); ++k) {
          refs.push_back({rows[k].time_ns, static_cast<int32_t>(i), k});
        }
      }
      std::stable_sort(refs.begin(), refs.end(),
                       [](const Ref& a, const Ref& b) { return a.time_ns < b.time_ns; });
      result.cluster.timeline.reserve(refs.size());
      result.timeline_replica.reserve(refs.size());
      for (const Ref& ref : refs) {
        result.cluster.timeline.push_back(
            engines[static_cast<size_t>(ref.replica)]->timeline()[ref.row]);
        result.timeline_replica.push_back(ref.replica);
      }
    }
  }
  if (progress) progress(done_count(), total, c.sim_ns);
  if (config.record_requests) result.cluster.requests = std::move(reqs.records);
  c.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  for (ReplaySummary& s : result.per_replica) s.wall_seconds = c.wall_seconds;
  return result;
}

}  // namespace kvsim
