// ReplayConfig::steady_decode (the scheduler's O(events) steady-decode mode) is a speed option
// that must change nothing. These tests replay random traces - long decodes that cross many
// block boundaries, shared token prefixes, content-free prompts, external hash ids, pools from
// roomy to preempting, prompts near max_model_len, prefix caching on and off, FCFS and
// priority, arrival gaps from bursts to idle - with the mode on and off and require the same
// timeline and request CSVs and the same JSON summary (evictions, prefix-cache counters,
// latency percentiles, async counters). They also drive the Scheduler directly and compare
// every step with the general path's: what schedule() and update_from_output() report, and,
// after settle_lazy_decodes(), every request's counters and table and the pool.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "kvsim/core/kv_backend.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/sched/scheduler.h"
#include "replay_texts.h"

namespace kvsim {
namespace {

// Up to 40 requests, outputs up to 120 tokens (many block boundaries at block size 4), a third
// with token-id prompts sharing a prefix pool, a sixth with external hash ids, the rest
// content-free; arrivals in bursts, steady streams and long idle gaps.
Trace steady_trace(std::mt19937_64& rng, int32_t max_model_len) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Trace t;
  const int n = uni(1, 40);
  int64_t at = 0;
  auto shared = std::make_shared<std::vector<int32_t>>();
  for (int i = 0; i < 200; ++i) shared->push_back(uni(0, 3));
  for (int i = 0; i < n; ++i) {
    const int gap = uni(0, 9);
    at += gap < 3 ? 0 : gap < 8 ? uni(1, 40'000'000) : uni(100'000'000, 2'000'000'000);
    TraceRequest r;
    r.arrival_ns = at;
    r.input_tokens = uni(1, std::min(90, max_model_len - 1));
    r.output_tokens = uni(0, 3) == 0 ? uni(0, 6) : uni(1, 120);
    r.priority = uni(0, 2);
    const int kind = uni(0, 5);
    if (kind <= 1) {
      auto toks = std::make_shared<std::vector<int32_t>>(
          shared->begin(), shared->begin() + std::min(r.input_tokens, uni(0, r.input_tokens)));
      while (static_cast<int32_t>(toks->size()) < r.input_tokens) toks->push_back(uni(0, 3));
      r.prompt_token_ids = toks;
    } else if (kind == 2) {
      auto ids = std::make_shared<std::vector<uint64_t>>();
      for (int k = 0; k * 8 < r.input_tokens; ++k) ids->push_back(static_cast<uint64_t>(uni(0, 3)));
      r.hash_ids = ids;
      r.hash_block_size = 8;
    }
    t.requests.push_back(r);
  }
  return t;
}

struct SteadyOutputs : test::ReplayTexts {
  int64_t steady_steps = 0;
  int64_t preemptions = 0;
};

SteadyOutputs replay_steady(const Trace& trace, ReplayConfig config, bool steady,
                            const StepTimeModel& step) {
  config.steady_decode = steady;
  NullKvBackend null;
  const ReplayResult r = run_replay(config, trace, null, step);
  SteadyOutputs out;
  static_cast<test::ReplayTexts&>(out) = test::replay_texts(r);
  out.steady_steps = r.summary.steady_decode_steps;  // not in the JSON
  out.preemptions = r.summary.preemptions;
  return out;
}

// Async (the default) and sync scheduling (issue 27: the sync path has the mode too).
class SteadyDecodeModes : public ::testing::TestWithParam<bool> {};

TEST_P(SteadyDecodeModes, RandomReplaysAreIdenticalWithAndWithoutTheMode) {
  std::mt19937_64 rng(20261202);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int64_t steady_cases = 0;
  int64_t preempting_steady_cases = 0;
  int64_t swapping_steady_cases = 0;
  int64_t total_steady_steps = 0;
  FixedStepTime fixed(10.0);
  for (int seed = 0; seed < 240; ++seed) {
    ReplayConfig c;
    c.scheduler.async_scheduling = GetParam();
    c.scheduler.block_size = pick(0, 2) == 0 ? 16 : 4;
    c.scheduler.max_model_len = pick(0, 3) == 0 ? 100 : 256;
    // From a pool that preempts all the time to one that never does.
    c.scheduler.num_gpu_blocks =
        1 + c.scheduler.max_model_len / c.scheduler.block_size + pick(0, 3) * 40 + pick(0, 20);
    c.scheduler.max_num_seqs = pick(1, 3) * 4;
    c.scheduler.max_num_batched_tokens = c.scheduler.max_num_seqs * pick(1, 3) * 8;
    c.scheduler.enable_prefix_caching = pick(0, 3) != 0;
    c.scheduler.policy = seed % 4 == 3 ? SchedulingPolicy::PRIORITY : SchedulingPolicy::FCFS;
    c.scheduler.long_prefill_token_threshold = pick(0, 3) == 0 ? 8 : 0;
    // Deferred private hashes (the default) or every hash eager.
    c.scheduler.defer_private_block_hashes = pick(0, 2) != 0;
    // Sync mode: swap preemption too (host slots from none to plenty), as vLLM V0 swapped.
    if (!GetParam() && pick(0, 2) == 0) {
      c.scheduler.preemption_mode = PreemptionMode::SWAP;
      c.scheduler.num_host_swap_slots = pick(0, 3) * 30;
      c.swap_bytes_per_block = 4096;
    }
    const Trace trace = steady_trace(rng, c.scheduler.max_model_len);
    const SteadyOutputs general = replay_steady(trace, c, false, fixed);
    const SteadyOutputs steady = replay_steady(trace, c, true, fixed);
    // Without a timeline sync runs defer cache marks (SchedulerConfig::lazy_cache_marks).
    ReplayConfig untimed = c;
    untimed.record_timeline = false;
    const SteadyOutputs steady_untimed = replay_steady(trace, untimed, true, fixed);
    const std::string what = fmt::format("seed {}", seed);
    EXPECT_EQ(general.timeline, steady.timeline) << what;
    EXPECT_EQ(general.requests, steady.requests) << what;
    EXPECT_EQ(general.summary, steady.summary) << what;
    EXPECT_EQ(general.requests, steady_untimed.requests) << what;
    EXPECT_EQ(general.summary, steady_untimed.summary) << what;
    EXPECT_EQ(general.steady_steps, 0) << what;
    if (steady.steady_steps > 0) {
      ++steady_cases;
      if (general.preemptions > 0) ++preempting_steady_cases;
      if (general.preemptions > 0 && c.scheduler.preemption_mode == PreemptionMode::SWAP &&
          c.scheduler.num_host_swap_slots > 0) {
        ++swapping_steady_cases;
      }
    }
    total_steady_steps += steady.steady_steps;
  }
  // The property is only interesting where the mode runs, also between preemptions.
  EXPECT_GE(steady_cases, 120);
  EXPECT_GE(preempting_steady_cases, 10);
  if (!GetParam()) {
    EXPECT_GE(swapping_steady_cases, 5);
  }
  EXPECT_GE(total_steady_steps, 20'000);
}

TEST_P(SteadyDecodeModes, RooflineStepTimesAreIdentical) {
  // The roofline model reads every field of StepWork: the steady batch's sums must equal the
  // per-request ones.
  std::mt19937_64 rng(7);
  RooflineModelShape shape;
  shape.name = "test-7b";
  shape.active_params = 7.6e9;
  shape.weight_bytes = 5.5e9;
  shape.num_layers = 28;
  shape.num_attention_heads = 28;
  shape.head_dim = 128;
  shape.kv_bytes_per_token_per_rank = 28672;
  const RooflineStepTime roofline(shape, RooflineGpu{"test-gpu", 165e12, 1.0e12});
  for (int seed = 0; seed < 40; ++seed) {
    ReplayConfig c;
    c.scheduler.async_scheduling = GetParam();
    c.scheduler.block_size = 4;
    c.scheduler.max_model_len = 256;
    c.scheduler.num_gpu_blocks = 200;
    c.scheduler.max_num_seqs = 8;
    c.scheduler.max_num_batched_tokens = 64;
    const Trace trace = steady_trace(rng, c.scheduler.max_model_len);
    const SteadyOutputs general = replay_steady(trace, c, false, roofline);
    const SteadyOutputs steady = replay_steady(trace, c, true, roofline);
    EXPECT_EQ(general.timeline, steady.timeline) << seed;
    EXPECT_EQ(general.summary, steady.summary) << seed;
  }
}

// Drives one Scheduler through EngineCore's loop (async or sync) over `n` requests arriving every
// few steps, and records per step what schedule() and update_from_output() produced (totals, new
// block ids, finished requests, and per request either its entry or - lazily - nothing), then,
// after settle_lazy_decodes(), every request's counters and table and the pool.
std::string describe(const Scheduler& s, const std::vector<std::unique_ptr<Request>>& reqs) {
  std::string out;
  for (const auto& r : reqs) {
    if (is_finished(r->status)) continue;
    out += fmt::format("r{} st{} C{} out{} ph{} fl{} hashes{} table[", r->request_id,
                       static_cast<int>(r->status), r->num_computed_tokens, r->num_output_tokens,
                       r->num_output_placeholders, r->num_in_flight_tokens, r->block_hashes.size());
    for (BlockId b : s.kv_cache_manager().get_block_ids(r->request_id))
      out += fmt::format("{},", b);
    out += "] ";
  }
  const KVCacheManager& kv = s.kv_cache_manager();
  out += fmt::format("free{} cached{} evictions{} padding{} held{} running{} waiting{}",
                     kv.num_free_blocks(), kv.block_pool().num_cached_blocks(),
                     kv.block_pool().num_evictions(), kv.padding_tokens(), kv.held_tokens(),
                     s.num_running(), s.num_waiting());
  return out;
}

std::string describe(const SchedulerOutput& o) {
  std::string out = fmt::format("step{} tok{} dec{} pre{} stop{} ", o.step_index,
                                o.total_num_scheduled_tokens, o.num_decode_tokens,
                                o.preempted_req_ids.size(), static_cast<int>(o.admission_stop));
  out += "new[";
  for (BlockId b : o.new_block_ids) out += fmt::format("{},", b);
  out += "] fin[";
  for (const auto& f : o.finished_in_update)
    out += fmt::format("{}/{},", f.request_id, f.num_freed_blocks);
  out += "] reported[";
  for (int64_t id : o.finished_req_ids) out += fmt::format("{},", id);
  out += "]";
  return out;
}

struct SchedulerRun {
  std::vector<std::string> steps;
  int64_t implicit = 0;
  int64_t preemptions = 0;
  int64_t quiet_steps = 0;          // through Scheduler::schedule_and_update_if_quiet
  int64_t quiet_finishes = 0;       // members finished by quiet_run_finish() (quiet_runs)
  int64_t quiet_entry_updates = 0;  // async quiet steps whose update had entries (quiet_runs)
};

// quiet_runs: the engine's runs (ReplicaEngine::run_quiet_steps) instead of
// schedule_and_update_if_quiet: quiet_run_step(true), which also runs members' stops (sync: the
// output described between its halves, as schedule()'s would be, then quiet_run_finish()).
// output_span: max_tokens runs over 1 .. output_span.
SchedulerRun drive(SchedulerConfig config, bool lazy, int n, int arrival_every,
                   bool cache_marks = false, bool quiet_runs = false, int output_span = 70) {
  config.lazy_steady_decodes = lazy;
  config.lazy_cache_marks = cache_marks;
  Scheduler s(config);
  std::vector<std::unique_ptr<Request>> reqs;
  for (int i = 0; i < n; ++i) {
    auto r = std::make_unique<Request>();
    r->request_id = i;
    r->num_prompt_tokens = 5 + (7 * i) % 40;
    r->max_tokens = 1 + (13 * i) % output_span;
    r->content.salt = static_cast<uint64_t>(i) + 1;
    reqs.push_back(std::move(r));
  }
  SchedulerRun run;
  int added = 0;
  for (int64_t step = 0; step < 5000; ++step) {
    if (added < n && step % arrival_every == 0)
      s.add_request(reqs[static_cast<size_t>(added++)].get());
    if (added == n && !s.has_requests() && s.num_pending_outputs() == 0) break;
    std::string line;
    bool process = true;
    const SchedulerOutput* run_step = quiet_runs && s.quiet_run_possible(/*finishes=*/true)
                                          ? s.quiet_run_step(/*finishes=*/true)
                                          : nullptr;
    if (run_step != nullptr) {
      run.implicit += run_step->implicit_decodes;
      ++run.quiet_steps;
      line = describe(*run_step);
      const auto finishers = static_cast<int64_t>(s.quiet_step_finishers());
      if (finishers > 0) s.quiet_run_finish();
      run.quiet_finishes += static_cast<int64_t>(s.quiet_step_update().finished_in_update.size());
      if (config.async_scheduling && !s.quiet_step_update().scheduled.empty()) {
        ++run.quiet_entry_updates;
      }
      line += " | " + describe(s.quiet_step_update());
      process = false;
      if (s.num_running() > 0) {
        EXPECT_TRUE(s.quiet_run_possible(/*finishes=*/true)) << "step " << step;
      }
    } else if (quiet_runs) {
      // Not quiet: the general calls below.
    } else if (const Scheduler::QuietStep q = s.schedule_and_update_if_quiet(); q.scheduled) {
      // The engine's quiet steps (lazy runs only): one call for both halves, the same outputs.
      run.implicit += q.scheduled->implicit_decodes;
      ++run.quiet_steps;
      line = describe(*q.scheduled) + " | " + describe(*q.updated);
      process = false;
      // A quiet step leaves every condition but the events as it found them: the engine's runs
      // (ReplicaEngine::run_quiet_steps) check them once and call quiet_run_step() repeatedly.
      EXPECT_TRUE(s.quiet_run_possible()) << "step " << step;
    }
    if (process && run_step == nullptr && s.has_requests()) {
      const SchedulerOutput& o = s.schedule();
      run.implicit += o.implicit_decodes;
      line = describe(o);
      run.preemptions += static_cast<int64_t>(o.preempted_req_ids.size());
      // Sync: EngineCore.step() updates every batch it schedules.
      process =
          !config.async_scheduling ||
          !(s.num_pending_outputs() < 2 && (o.total_num_scheduled_tokens > 0 || s.has_requests()));
    }
    if (process && s.num_pending_outputs() > 0) line += " | " + describe(s.update_from_output());
    // The event bound that lets schedule() and update_from_output() skip their scans.
    EXPECT_TRUE(s.lazy_event_bound_holds()) << "step " << step;
    EXPECT_TRUE(s.lazy_agenda_holds()) << "step " << step;
    EXPECT_TRUE(s.lazy_marks_hold()) << "step " << step;
    s.settle_lazy_decodes();
    run.steps.push_back(line + " | " + describe(s, reqs));
  }
  return run;
}

TEST_P(SteadyDecodeModes, SchedulerStepsAndStateAreTheGeneralPaths) {
  int64_t implicit = 0;
  int64_t preemptions = 0;
  int64_t quiet = 0;
  int64_t quiet_finishes = 0;
  int64_t quiet_entry_updates = 0;
  for (const bool caching : {true, false}) {
    for (const int32_t bs : {4, 16}) {
      for (const int32_t blocks_per_seq : {2, 6}) {  // 2: preempts; 6: roomy
        for (const int every : {1, 3, 17}) {
          SchedulerConfig c;
          c.async_scheduling = GetParam();
          c.block_size = bs;
          c.max_model_len = 128;
          c.num_gpu_blocks = 1 + blocks_per_seq * (128 / bs);
          c.max_num_batched_tokens = 32;
          c.max_num_seqs = 8;
          c.enable_prefix_caching = caching;
          c.defer_private_block_hashes = every != 3;
          const SchedulerRun general = drive(c, false, 30, every);
          const SchedulerRun lazy = drive(c, true, 30, every);
          // Deferred cache marks (sync only; the state is compared once settled).
          const SchedulerRun marks = drive(c, true, 30, every, /*cache_marks=*/true);
          // The engine's runs (cache marks as the engine sets them), with quiet finishes.
          const SchedulerRun runs =
              drive(c, true, 30, every, /*cache_marks=*/true, /*quiet_runs=*/true);
          const std::string what = fmt::format("caching {} bs {} blocks/seq {} every {}", caching,
                                               bs, blocks_per_seq, every);
          EXPECT_EQ(general.implicit, 0) << what;
          ASSERT_EQ(general.steps.size(), lazy.steps.size()) << what;
          ASSERT_EQ(general.steps.size(), marks.steps.size()) << what;
          ASSERT_EQ(general.steps.size(), runs.steps.size()) << what;
          for (size_t k = 0; k < general.steps.size(); ++k) {
            ASSERT_EQ(general.steps[k], lazy.steps[k]) << what << " step " << k;
            ASSERT_EQ(general.steps[k], marks.steps[k]) << what << " marks, step " << k;
            ASSERT_EQ(general.steps[k], runs.steps[k]) << what << " runs, step " << k;
          }
          EXPECT_EQ(general.quiet_steps, 0) << what;
          implicit += lazy.implicit;
          preemptions += lazy.preemptions;
          quiet += lazy.quiet_steps;
          quiet_finishes += runs.quiet_finishes;
          quiet_entry_updates += runs.quiet_entry_updates;
        }
      }
    }
  }
  // Most decodes of these runs are implicit.
  EXPECT_GE(implicit, 5000);
  EXPECT_GE(preemptions, 50);
  EXPECT_GE(quiet, 100);
  // Runs finish members in quiet steps; async runs start with updates of entries.
  EXPECT_GE(quiet_finishes, 100);
  if (GetParam()) {
    EXPECT_GE(quiet_entry_updates, 100);
  }
}

// Blocks of 128 tokens and outputs up to 300: members' next events lie up to ~128 steps ahead,
// beyond the agenda's 64 lists, so a list holds members of several steps (a step reads only its
// own); drive() checks the agenda's invariant after every step.
TEST_P(SteadyDecodeModes, EventsBeyondTheAgendasStepsAreTheGeneralPaths) {
  int64_t quiet = 0;
  for (const bool caching : {true, false}) {
    for (const int32_t blocks : {8, 24}) {
      for (const int every : {1, 7}) {
        SchedulerConfig c;
        c.async_scheduling = GetParam();
        c.block_size = 128;
        c.max_model_len = 512;
        c.num_gpu_blocks = 1 + blocks;
        c.max_num_batched_tokens = 256;
        c.max_num_seqs = 8;
        c.enable_prefix_caching = caching;
        const SchedulerRun general = drive(c, false, 24, every, false, false, 300);
        const SchedulerRun lazy = drive(c, true, 24, every, false, false, 300);
        const SchedulerRun runs = drive(c, true, 24, every, true, true, 300);
        const std::string what =
            fmt::format("caching {} blocks {} every {}", caching, blocks, every);
        ASSERT_EQ(general.steps.size(), lazy.steps.size()) << what;
        ASSERT_EQ(general.steps.size(), runs.steps.size()) << what;
        for (size_t k = 0; k < general.steps.size(); ++k) {
          ASSERT_EQ(general.steps[k], lazy.steps[k]) << what << " step " << k;
          ASSERT_EQ(general.steps[k], runs.steps[k]) << what << " runs, step " << k;
        }
        quiet += runs.quiet_steps;
      }
    }
  }
  EXPECT_GE(quiet, 1000);
}

INSTANTIATE_TEST_SUITE_P(SteadyDecode, SteadyDecodeModes, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? std::string("Async") : std::string("Sync");
                         });

}  // namespace
}  // namespace kvsim
