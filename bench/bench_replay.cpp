// Replay throughput: the whole Azure conv trace (19,366 requests) through the scheduler and
// allocator with `kvsim replay`'s defaults (qwen2.5-7b on an RTX 4090: 7,368 blocks of 16,
// max_model_len 1 + longest request, budget 2048, max_num_seqs 256, roofline step time, null
// backend; async scheduling as vLLM's default, sync as the baseline of the same run).
// Target (issue 3): < 0.5 s wall per replay on one core.
// Counters: requests/s and request-steps/s (sum over steps of running requests).
#include <benchmark/benchmark.h>

#include <string>

#include "kvsim/core/kv_backend.h"
#include "kvsim/core/model_presets.h"
#include "kvsim/core/planner.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/replay_setup.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/traces/trace.h"

namespace {

const kvsim::Trace& azure_conv() {
  static const kvsim::Trace trace =
      kvsim::read_trace(std::string(KVSIM_SOURCE_DIR) + "/traces/AzureLLMInferenceTrace_conv.csv");
  return trace;
}

void BM_ReplayAzureConv(benchmark::State& state) {
  const kvsim::Trace& trace = azure_conv();
  kvsim::PlanInputs in;
  in.model = kvsim::find_model_preset("qwen2.5-7b");
  in.gpu = kvsim::find_gpu_preset("rtx4090");
  // As `kvsim replay` with no model flag: the default model, max_model_len from the trace.
  kvsim::resolve_max_model_len(in, trace, /*model_is_default=*/true);
  const kvsim::Plan plan = kvsim::plan_replay_pool(in);
  kvsim::ReplaySettings settings;
  settings.scheduler.enable_prefix_caching = state.range(0) != 0;
  settings.record_timeline = state.range(1) != 0;
  settings.record_requests = state.range(1) != 0;
  settings.async_scheduling = state.range(2) != 0;
  const kvsim::ReplayConfig rc = kvsim::make_replay_config(plan, in.gpu, settings);
  const auto step_time = kvsim::make_step_time_model("roofline", in, plan);
  kvsim::NullKvBackend backend;
  double request_steps = 0;
  int64_t steps = 0;
  for (auto _ : state) {
    const kvsim::ReplayResult r = kvsim::run_replay(rc, trace, backend, *step_time);
    request_steps = r.summary.mean_running * static_cast<double>(r.summary.steps);
    steps = r.summary.steps;
    benchmark::DoNotOptimize(r.summary.finished);
  }
  const auto n = static_cast<double>(trace.requests.size());
  state.counters["requests/s"] =
      benchmark::Counter(n * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["request_steps/s"] = benchmark::Counter(
      request_steps * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["steps"] = static_cast<double>(steps);
}
// Args: {prefix caching, record timeline + requests, async scheduling}.
BENCHMARK(BM_ReplayAzureConv)
    ->ArgNames({"caching", "records", "async"})
    ->Args({1, 0, 1})
    ->Args({1, 1, 1})
    ->Args({0, 0, 1})
    ->Args({1, 0, 0})
    ->Args({0, 0, 0})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
