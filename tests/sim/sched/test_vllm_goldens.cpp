// Conformance with vLLM's real v1 Scheduler, release by release (issue 8 part 4, issue 26).
//
// tests/data/vllm_goldens/<release>/*.json.gz (0.26/, 0.33/) were recorded by
// tools/vllm_conformance/record.py, which drives the released wheel's Scheduler/AsyncScheduler on
// CPU over small cases and writes the case input (config + requests) next to what vLLM did at every
// schedule() call. This test replays each SYNC case through kvsim's Scheduler and each ASYNC case
// through kvsim's EngineCore with the same engine loop (docs/conformance.md §Engine loop) and
// compares every step field by field; no vLLM is needed. Each case runs with the behaviour of the
// release that recorded it (its "vllm_version", SchedulerConfig::behavior). Hybrid cases
// (config.kv_cache_groups, issue 9) record one block-id list per KV cache group and run through
// KVCacheManager's coordinator.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvsim/core/kv_backend.h"
#include "kvsim/core/vllm_version.h"
#include "kvsim/sim/engine/engine_core.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/io/line_reader.h"
#include "kvsim/sim/sched/scheduler.h"

namespace kvsim {
namespace {

using nlohmann::json;

// vLLM's prefix-cache counters, in the golden's "pc" order. The 0.26.0 wheel records them inside
// get_computed_blocks on every lookup (a failed admission retried next step is counted again),
// 0.33.0 once per admission; both count a request with num_preemptions > 0 only under
// preempted_* (exclusive sets). kvsim records them as the case's release does, so all six are
// compared at every step like any other field.
constexpr std::array<const char*, 6> kPrefixCounterNames = {
    "requests", "queries", "hits", "preempted_requests", "preempted_queries", "preempted_hits"};
std::filesystem::path goldens_dir() {
  return std::filesystem::path(KVSIM_SOURCE_DIR) / "tests" / "data" / "vllm_goldens";
}

// The releases recorded (one folder each).
constexpr std::array<const char*, 2> kReleases = {"0.26", "0.33"};

// Case names ("<release>/<mode>_..."), sorted, for the given mode prefix ("sync_" / "async_");
// release: one folder, or every release when empty.
std::vector<std::string> case_names(const std::string& prefix, const std::string& release = "") {
  std::vector<std::string> names;
  for (const char* r : kReleases) {
    if (!release.empty() && release != r) continue;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(goldens_dir() / r, ec)) {
      const std::string f = e.path().filename().string();
      const std::string ext = ".json.gz";
      if (f.size() > ext.size() && f.ends_with(ext) && f.starts_with(prefix)) {
        names.push_back(std::string(r) + "/" + f.substr(0, f.size() - ext.size()));
      }
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A test name from a case name: "0.33/sync_fcfs_cache" -> "v0_33_sync_fcfs_cache".
std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = "v" + info.param;
  std::replace_if(
      n.begin(), n.end(), [](char c) { return c == '.' || c == '/'; }, '_');
  return n;
}

json load_case(const std::string& name) {
  const std::string path = (goldens_dir() / (name + ".json.gz")).string();
  json j = json::parse(read_text_file(path));
  if (j.at("format") != "kvsim-vllm-golden/1") {
    throw std::runtime_error(path + ": unknown format " + j.at("format").dump());
  }
  return j;
}

bool resumed_as_new(const json& j) {
  return j.value("use_v2_model_runner", false);
}

// The case's scheduler configuration, with the behaviour of the release that recorded it.
SchedulerConfig config_from(const json& j) {
  const json& c = j.at("config");
  SchedulerConfig s;
  const std::string version = j.at("vllm_version").get<std::string>();
  const std::optional<VllmVersion> release = parse_vllm_version(version);
  if (!release) throw std::runtime_error("golden recorded by unknown vLLM " + version);
  s.behavior = vllm_behavior(*release);
  // The retention interval the case ran with: config's key (null = None, dense), else the
  // release's default.
  if (c.contains("prefix_cache_retention_interval")) {
    const json& r = c.at("prefix_cache_retention_interval");
    s.prefix_cache_retention_interval = r.is_null() ? -1 : r.get<int32_t>();
  }
  if (c.contains("max_num_active_seqs") && !c.at("max_num_active_seqs").is_null()) {
    s.max_num_active_seqs = c.at("max_num_active_seqs").get<int32_t>();
  }
  if (c.contains("long_prefill_token_threshold_adaptive")) {
    s.long_prefill_token_threshold_adaptive =
        c.at("long_prefill_token_threshold_adaptive").get<bool>();
  }
  s.block_size = c.at("block_size").get<int32_t>();
  s.num_gpu_blocks = c.at("num_gpu_blocks").get<int32_t>();
  s.max_model_len = c.at("max_model_len").get<int32_t>();
  s.max_num_batched_tokens = c.at("max_num_batched_tokens").get<int32_t>();
  s.max_num_seqs = c.at("max_num_seqs").get<int32_t>();
  s.long_prefill_token_threshold = c.at("long_prefill_token_threshold").get<int32_t>();
  s.enable_chunked_prefill = c.at("enable_chunked_prefill").get<bool>();
  s.enable_prefix_caching = c.at("enable_prefix_caching").get<bool>();
  const std::string policy = c.at("policy").get<std::string>();
  if (policy != "fcfs" && policy != "priority") throw std::runtime_error("bad policy " + policy);
  s.policy = policy == "fcfs" ? SchedulingPolicy::FCFS : SchedulingPolicy::PRIORITY;
  s.watermark = c.at("watermark").get<double>();
  s.scheduler_reserve_full_isl = c.at("scheduler_reserve_full_isl").get<bool>();
  if (c.contains("kv_cache_groups")) {
    KVCacheConfig& kv = s.kv_cache_config;
    kv.num_blocks = s.num_gpu_blocks;
    int32_t layer = 0;
    for (const json& g : c.at("kv_cache_groups")) {
      KVCacheGroupSpec group;
      group.layer_indices = {layer++};
      KVCacheSpec& spec = group.kv_cache_spec;
      spec.block_size = s.block_size;
      spec.page_size_bytes = 1;  // any size equal across groups: the recorder's tiny specs
      const std::string kind = g.at("kind").get<std::string>();
      if (kind == "full_attention") {
        spec.kind = KVCacheSpecKind::kFullAttention;
      } else if (kind == "sliding_window") {
        spec.kind = KVCacheSpecKind::kSlidingWindow;
        spec.sliding_window = g.at("sliding_window").get<int32_t>();
      } else if (kind == "chunked_local_attention") {
        spec.kind = KVCacheSpecKind::kChunkedLocalAttention;
        spec.attention_chunk_size = g.at("attention_chunk_size").get<int32_t>();
      } else {
        throw std::runtime_error("bad kv_cache_groups kind " + kind);
      }
      kv.kv_cache_groups.push_back(std::move(group));
    }
  }
  return s;
}

// The case's requests as kvsim sees them: the recorded prompt token ids, salt = id + 1 (blocks
// holding generated tokens are unique to their request, as vLLM's unique generated ids make them).
std::deque<Request> requests_from(const json& reqs) {
  std::deque<Request> out;
  for (const json& r : reqs) {
    Request& q = out.emplace_back();
    q.request_id = r.at("id").get<int64_t>();
    if (q.request_id != static_cast<int64_t>(out.size()) - 1) {
      throw std::runtime_error("request ids must be dense and in order");
    }
    auto tokens = std::make_shared<std::vector<int32_t>>();
    for (const json& run : r.at("prompt")) {
      const auto first = run.at(0).get<int32_t>();
      const auto count = run.at(1).get<int32_t>();
      for (int32_t t = 0; t < count; ++t) tokens->push_back(first + t);
    }
    q.num_prompt_tokens = static_cast<int32_t>(tokens->size());
    q.max_tokens = r.at("max_tokens").get<int32_t>();
    q.priority = r.at("priority").get<int32_t>();
    q.arrival_time_ns = r.at("arrival_step").get<int64_t>();
    q.content.token_ids = std::move(tokens);
    q.content.salt = static_cast<uint64_t>(q.request_id) + 1;
  }
  return out;
}

// One schedule() call as the golden records it (see docs/conformance.md §Step record).
struct StepRecord {
  int64_t k = 0;
  json s = json::array();
  std::vector<int64_t> p;
  std::vector<int64_t> f;
  int64_t r = 0;
  int64_t w = 0;
  int64_t free = 0;
  std::array<int64_t, 6> pc{};
  int64_t free_u = 0;
};

// resumed_as_new: the golden's SchedulerOutput came from vLLM 0.33 with its v2 model runner
// ("use_v2_model_runner"), which lists requests resumed from preemption among the new ones
// (scheduler.py: scheduled_new_reqs.extend(scheduled_resumed_reqs)); their block lists are the
// whole table either way.
StepRecord record_schedule(int64_t k, const Scheduler& s, const SchedulerOutput& out,
                           bool resumed_as_new) {
  StepRecord rec;
  rec.k = k;
  const KVCacheManager& kv = s.kv_cache_manager();
  const bool per_group = !s.config().kv_cache_config.kv_cache_groups.empty();
  for (const ScheduledRequest& x : out.scheduled) {
    const int kind = x.is_new ? 1 : (x.is_resumed ? (resumed_as_new ? 1 : 2) : 0);
    json blocks = json::array();
    if (per_group) {  // hybrid: one list per group
      for (size_t g = 0; g < kv.num_kv_cache_groups(); ++g) {
        json ids = json::array();
        if (kind == 0) {
          const auto& ends = out.new_block_group_ends;
          const auto base = static_cast<size_t>(x.group_ends_begin);
          const int32_t begin = g == 0 ? 0 : ends[base + g - 1];
          for (int32_t i = begin; i < ends[base + g]; ++i) {
            ids.push_back(out.new_block_ids[static_cast<size_t>(x.new_blocks_begin + i)]);
          }
        } else {
          for (BlockId b : kv.get_block_ids(x.request_id, g)) ids.push_back(b);
        }
        blocks.push_back(std::move(ids));
      }
    } else if (kind == 0) {
      for (int32_t i = 0; i < x.new_blocks_count; ++i) {
        blocks.push_back(out.new_block_ids[static_cast<size_t>(x.new_blocks_begin + i)]);
      }
    } else {  // vLLM hands a new or resumed request its whole table (hits + new blocks)
      for (BlockId b : kv.get_block_ids(x.request_id)) blocks.push_back(b);
    }
    rec.s.push_back(json::array({x.request_id, x.num_tokens, x.num_computed_tokens, blocks, kind}));
  }
  rec.p = out.preempted_req_ids;
  rec.f = out.finished_req_ids;
  std::sort(rec.p.begin(), rec.p.end());
  std::sort(rec.f.begin(), rec.f.end());
  rec.r = static_cast<int64_t>(s.num_running());
  rec.w = static_cast<int64_t>(s.num_waiting());
  rec.free = kv.num_free_blocks();
  const PrefixCacheStats& st = kv.prefix_cache_stats();
  rec.pc = {st.requests,           st.queries,           st.hits,
            st.preempted_requests, st.preempted_queries, st.preempted_hits};
  return rec;
}

std::string show_step(const json& step) {
  return step.dump();
}

json to_json(const StepRecord& r) {
  return json{{"k", r.k}, {"s", r.s},       {"p", r.p},   {"f", r.f},          {"r", r.r},
              {"w", r.w}, {"free", r.free}, {"pc", r.pc}, {"free_u", r.free_u}};
}

// Replays one sync case through kvsim and compares every step. Returns false after the first
// step with a mismatch (later steps only cascade); every differing field of that step is reported
// with the case, step, field, expected and actual values.
bool compare_sync_case(const std::string& name) {
  const json j = load_case(name);
  EXPECT_EQ(j.at("mode"), "sync") << name;
  const SchedulerConfig config = config_from(j);
  Scheduler s(config);
  std::deque<Request> reqs = requests_from(j.at("requests"));
  const json& steps = j.at("steps");

  size_t next = 0;                // next request to add
  size_t step_index = 0;          // next golden step to compare
  bool pending_finished = false;  // finished ids not yet reported by a schedule() (vLLM:
                                  // has_finished_requests, part of has_requests)
  int64_t k = 0;
  while (true) {
    while (next < reqs.size() && reqs[next].arrival_time_ns <= k) s.add_request(&reqs[next++]);
    if (!s.has_unfinished_requests() && !pending_finished) {
      if (next == reqs.size()) break;
      k = reqs[next].arrival_time_ns;  // idle: the engine waits for the next arrival
      continue;
    }
    const SchedulerOutput& out = s.schedule();
    StepRecord got = record_schedule(k, s, out, resumed_as_new(j));
    s.update_from_output();
    pending_finished = std::any_of(out.scheduled.begin(), out.scheduled.end(),
                                   [](const ScheduledRequest& x) { return x.finished; });
    got.free_u = s.kv_cache_manager().num_free_blocks();

    const std::string where =
        "case " + name + ", step " + std::to_string(step_index) + " (k=" + std::to_string(k) + ")";
    if (step_index >= steps.size()) {
      ADD_FAILURE() << where << ": kvsim takes more steps than vLLM (" << steps.size() << ")";
      return false;
    }
    const json& exp = steps[step_index];
    const json act = to_json(got);
    bool ok = true;
    auto check = [&](const char* field, const json& e, const json& a) {
      if (e != a) {
        ADD_FAILURE() << where << ", field " << field << ": expected " << e.dump() << ", actual "
                      << a.dump();
        ok = false;
      }
    };
    check("k", exp.at("k"), act.at("k"));
    check("s (scheduled [id, tokens, computed, blocks, kind])", exp.at("s"), act.at("s"));
    check("p (preempted)", exp.at("p"), act.at("p"));
    check("f (finished)", exp.at("f"), act.at("f"));
    check("r (running)", exp.at("r"), act.at("r"));
    check("w (waiting)", exp.at("w"), act.at("w"));
    check("free (after schedule)", exp.at("free"), act.at("free"));
    check("free_u (after update_from_output)", exp.at("free_u"), act.at("free_u"));
    for (size_t i = 0; i < kPrefixCounterNames.size(); ++i) {
      check((std::string("pc.") + kPrefixCounterNames[i]).c_str(), exp.at("pc").at(i), got.pc[i]);
    }
    if (!ok) {
      ADD_FAILURE() << where << ": first differing step\n  vLLM:  " << show_step(exp)
                    << "\n  kvsim: " << show_step(act);
      return false;
    }
    ++step_index;
    ++k;
  }
  if (step_index != steps.size()) {
    ADD_FAILURE() << "case " << name << ": kvsim finished after " << step_index
                  << " steps, vLLM after " << steps.size();
    return false;
  }
  const json& fin = j.at("final");
  for (size_t i = 0; i < reqs.size(); ++i) {
    const json e = fin.at(i);
    const json a = json::array({reqs[i].num_output_tokens, reqs[i].num_preemptions});
    if (e != a) {
      ADD_FAILURE() << "case " << name << ", request " << i
                    << ", field final [num_output_tokens, num_preemptions]: expected " << e.dump()
                    << ", actual " << a.dump();
      return false;
    }
  }
  return true;
}

// Replays one ASYNC case through kvsim's EngineCore (AsyncScheduler + batch queue of 2: the
// recorder's engine loop is vLLM's step_with_batch_queue) and compares every step, including "u"
// (which batches were processed after this schedule() in the same engine iteration) and free
// blocks after them. State is recorded in EngineCore's after-schedule hook, before the same
// iteration's update_from_output().
bool compare_async_case(const std::string& name) {
  const json j = load_case(name);
  EXPECT_EQ(j.at("mode"), "async") << name;
  SchedulerConfig config = config_from(j);
  config.async_scheduling = true;
  Scheduler s(config);
  EngineCore engine(s);
  std::deque<Request> reqs = requests_from(j.at("requests"));
  const json& steps = j.at("steps");

  json got = json::array();         // one record per schedule() call
  std::vector<int64_t> k_of_batch;  // SchedulerOutput::step_index -> the k it was scheduled at
  size_t next = 0;
  int64_t k = 0;
  while (true) {
    while (next < reqs.size() && reqs[next].arrival_time_ns <= k) s.add_request(&reqs[next++]);
    if (!engine.has_work()) {
      if (next == reqs.size()) break;
      k = reqs[next].arrival_time_ns;  // idle: nothing to schedule, nothing in flight
      continue;
    }
    const EngineStep st = engine.step([&](const SchedulerOutput& out) {
      StepRecord rec = record_schedule(k, s, out, resumed_as_new(j));
      rec.free_u = rec.free;
      json r = to_json(rec);
      r["u"] = json::array();
      got.push_back(std::move(r));
      k_of_batch.push_back(k);
      ++k;
    });
    if (st.processed != nullptr) {
      // The recorder attaches an update to the latest schedule() record.
      got.back()["u"].push_back(k_of_batch.at(static_cast<size_t>(st.processed->step_index)));
      got.back()["free_u"] = s.kv_cache_manager().num_free_blocks();
    }
  }
  for (size_t i = 0; i < got.size() && i < steps.size(); ++i) {
    const json& exp = steps[i];
    const json& act = got[i];
    const std::string where =
        "case " + name + ", step " + std::to_string(i) + " (k=" + exp.at("k").dump() + ")";
    bool ok = true;
    for (const char* field : {"k", "s", "p", "f", "r", "w", "free", "pc", "u", "free_u"}) {
      if (exp.at(field) != act.at(field)) {
        ADD_FAILURE() << where << ", field " << field << ": expected " << exp.at(field).dump()
                      << ", actual " << act.at(field).dump();
        ok = false;
      }
    }
    if (!ok) {
      ADD_FAILURE() << where << ": first differing step\n  vLLM:  " << show_step(exp)
                    << "\n  kvsim: " << show_step(act);
      return false;
    }
  }
  if (got.size() != steps.size()) {
    ADD_FAILURE() << "case " << name << ": kvsim took " << got.size() << " steps, vLLM "
                  << steps.size();
    return false;
  }
  const json& fin = j.at("final");
  for (size_t i = 0; i < reqs.size(); ++i) {
    const json a = json::array({reqs[i].num_output_tokens, reqs[i].num_preemptions});
    if (fin.at(i) != a) {
      ADD_FAILURE() << "case " << name << ", request " << i
                    << ", field final [num_output_tokens, num_preemptions]: expected "
                    << fin.at(i).dump() << ", actual " << a.dump();
      return false;
    }
  }
  return true;
}

class VllmGoldenAsync : public ::testing::TestWithParam<std::string> {};

TEST_P(VllmGoldenAsync, EveryStepMatches) {
  EXPECT_TRUE(compare_async_case(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Recorded, VllmGoldenAsync, ::testing::ValuesIn(case_names("async_")),
                         test_name);

class VllmGoldenSync : public ::testing::TestWithParam<std::string> {};

TEST_P(VllmGoldenSync, EveryStepMatches) {
  EXPECT_TRUE(compare_sync_case(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Recorded, VllmGoldenSync, ::testing::ValuesIn(case_names("sync_")),
                         test_name);

// The same requests through the whole replay engine (ReplicaEngine: the engine loop, its clock
// and its never-admittable rule), arrival step k at k ms with 1 ms steps: every request vLLM
// finished finishes with vLLM's output length, none is rejected (issue 23: async replays aborted
// requests vLLM admits). Both the general and the lazy steady-decode paths.
void check_replay_outcome(const std::string& name) {
  const json j = load_case(name);
  ReplayConfig c;
  c.scheduler = config_from(j);
  c.scheduler.async_scheduling = j.at("mode") == "async";
  Trace t;
  for (const json& r : j.at("requests")) {
    TraceRequest& q = t.requests.emplace_back();
    q.arrival_ns = r.at("arrival_step").get<int64_t>() * 1'000'000;
    auto tokens = std::make_shared<std::vector<int32_t>>();
    for (const json& run : r.at("prompt")) {
      const auto first = run.at(0).get<int32_t>();
      const auto count = run.at(1).get<int32_t>();
      for (int32_t x = 0; x < count; ++x) tokens->push_back(first + x);
    }
    q.input_tokens = static_cast<int32_t>(tokens->size());
    q.output_tokens = r.at("max_tokens").get<int32_t>();
    q.priority = r.at("priority").get<int32_t>();
    q.prompt_token_ids = std::move(tokens);
  }
  const json& fin = j.at("final");
  for (const bool invariants : {false, true}) {
    c.check_invariants = invariants;  // on: the general path; off: lazy decodes where eligible
    FixedStepTime step(1.0);
    NullKvBackend null;
    const ReplayResult r = run_replay(c, t, null, step);
    EXPECT_EQ(r.summary.rejected, 0) << name;
    EXPECT_EQ(r.summary.finished, static_cast<int64_t>(t.requests.size())) << name;
    for (size_t i = 0; i < r.requests.size(); ++i) {
      EXPECT_EQ(r.requests[i].output_tokens, fin.at(i).at(0).get<int32_t>())
          << name << " request " << i;
    }
  }
}

class VllmGoldenOutcome : public ::testing::TestWithParam<std::string> {};

TEST_P(VllmGoldenOutcome, ReplayFinishesWhatVllmFinished) {
  check_replay_outcome(GetParam());
}

std::vector<std::string> all_case_names() {
  std::vector<std::string> v = case_names("sync_");
  for (std::string& n : case_names("async_")) v.push_back(std::move(n));
  return v;
}

INSTANTIATE_TEST_SUITE_P(Recorded, VllmGoldenOutcome, ::testing::ValuesIn(all_case_names()),
                         test_name);

TEST(VllmGoldens, SuiteIsPresent) {
  // A missing or emptied directory must fail, not pass vacuously: every release has them all.
  for (const char* release : kReleases) {
    const std::filesystem::path dir = goldens_dir() / release;
    EXPECT_GE(case_names("sync_", release).size(), 8u) << dir;
    EXPECT_GE(case_names("async_", release).size(), 8u) << dir;
    // Hybrid KV layouts (issue 9): sliding window, Gemma-like 5:1, chunked local, starved pool.
    EXPECT_GE(case_names("sync_hybrid_", release).size(), 5u) << dir;
    EXPECT_GE(case_names("async_hybrid_", release).size(), 5u) << dir;
    // Admission at the edge (issue 23): an empty pool, a single seat, tiny requests at once.
    for (const char* edge : {"fcfs_empty_only", "fcfs_single_seat", "fcfs_tiny_at_once"}) {
      for (const char* mode : {"sync_", "async_"}) {
        EXPECT_TRUE(std::filesystem::exists(dir / (std::string(mode) + edge + ".json.gz")))
            << release << "/" << mode << edge;
      }
    }
  }
}

}  // namespace
}  // namespace kvsim
