// kvsim size's real runner: one plan per candidate, one cluster replay per trial.
#include <memory>
#include <stdexcept>
#include <string>

#include <fmt/core.h>

#include "kvsim/core/kv_backend.h"
#include "kvsim/core/model_presets.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/sweep/size_replay.h"

namespace kvsim {

CandidateSetup prepare_size_candidate(const SizeBase& base, const Trace& trace,
                                      const SizeCandidate& candidate) {
  if (base.cluster.slo.empty()) throw std::invalid_argument("kvsim size needs an SLO");
  PlanInputs in = base.plan;
  in.gpu = find_gpu_preset(candidate.gpu);
  in.tensor_parallel_size = candidate.tensor_parallel_size;
  in.kv_cache_dtype = candidate.kv_cache_dtype;
  if (candidate.block_size) in.block_size = *candidate.block_size;
  ReplaySettings settings = base.settings;
  if (candidate.max_num_seqs) settings.max_num_seqs = candidate.max_num_seqs;
  settings.record_timeline = false;
  settings.record_requests = false;

  CandidateSetup setup;
  std::shared_ptr<const Plan> plan;
  try {
    plan = std::make_shared<const Plan>(plan_replay_pool(in, settings));
  } catch (const DoesNotFitError& e) {
    setup.does_not_fit = true;
    setup.infeasible_reason = fmt::format("does not fit: {}", e.what());
    return setup;
  } catch (const PlanError& e) {
    setup.infeasible_reason = fmt::format("invalid: {}", e.what());
    return setup;
  } catch (const std::invalid_argument& e) {
    // plan_replay_pool's own refusals: a pool of fewer than 2 blocks (or beyond int32) cannot
    // hold a request, which is a memory shortfall.
    setup.does_not_fit = true;
    setup.infeasible_reason = fmt::format("does not fit: {}", e.what());
    return setup;
  }
  auto rc = std::make_shared<ReplayConfig>(make_replay_config(*plan, in.gpu, settings));
  rc->record_timeline = false;
  rc->record_requests = false;
  setup.block_size = rc->scheduler.block_size;
  setup.max_num_seqs = rc->scheduler.max_num_seqs;
  setup.max_num_batched_tokens = rc->scheduler.max_num_batched_tokens;
  setup.kv_cache_dtype = plan->kv_cache_dtype;
  setup.num_gpu_blocks = plan->num_gpu_blocks;
  setup.formula_max_concurrency = formula_max_concurrency(*plan);
  setup.vllm_max_concurrency = plan->vllm_max_concurrency;

  // The plan and step-time model are built once and shared by every trial of the candidate.
  std::shared_ptr<const StepTimeModel> step_time = make_step_time_model(base.step_time, in, *plan);
  ClusterConfig cluster = base.cluster;
  const bool early_stop = base.early_stop;
  const Trace* t = &trace;
  setup.run = [rc, step_time, cluster, early_stop, t](int32_t replicas) {
    ClusterConfig cc = cluster;
    cc.replicas = replicas;
    if (early_stop) cc.stop_when_slo_fails = cc.slo;
    const ReplicaBackendFactory null_backends = [](int32_t) -> std::unique_ptr<KvBackend> {
      return std::make_unique<NullKvBackend>();
    };
    const ClusterResult r = run_cluster_replay(*rc, cc, *t, null_backends, *step_time);
    const ReplaySummary& s = r.cluster.summary;
    SizeTrial trial;
    trial.replicas = replicas;
    trial.meets_slo = r.slo.p99_verdict;
    trial.stopped_early = r.stopped_early;
    trial.ttft_p99_s = s.latency.ttft.p99;
    trial.tpot_p99_s = s.latency.tpot.p99;
    trial.e2e_p99_s = s.latency.e2e.p99;
    trial.slo_attainment = r.slo.attainment;
    trial.finished = s.finished;
    trial.rejected = s.rejected;
    double running_steps = 0;
    double steps = 0;
    for (const ReplaySummary& rep : r.per_replica) {
      running_steps += rep.mean_running * static_cast<double>(rep.steps);
      steps += static_cast<double>(rep.steps);
    }
    trial.mean_running_per_replica = steps > 0 ? running_steps / steps : 0.0;
    return trial;
  };
  return setup;
}

}  // namespace kvsim
