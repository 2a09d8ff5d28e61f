// TraceStream (trace_stream.h): the streamed requests, held or read again, equal read_trace's on
// every bundled trace under every normalisation option, errors are the same, traces out of file
// order are refused (read whole instead), and a streaming replay (replay.h) is identical to the
// whole-trace one while holding only the requests in flight.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bundled_trace.h"
#include "kvsim/core/kv_backend.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/report/report.h"
#include "kvsim/sim/traces/trace.h"
#include "kvsim/sim/traces/trace_stream.h"
#include "kvsim/sim/traces/trace_writer.h"
#include "random_trace.h"
#include "scratch_dir_test.h"

namespace kvsim {
namespace {

std::vector<TraceRequest> streamed(const TraceStream& s) {
  std::vector<TraceRequest> out;
  s.for_each([&](TraceRequest&& r) { out.push_back(std::move(r)); });
  return out;
}

template <typename T>
bool same_ptr_contents(const std::shared_ptr<const T>& a, const std::shared_ptr<const T>& b) {
  if (!a || !b) return !a && !b;
  return *a == *b;
}

void expect_same_requests(const std::vector<TraceRequest>& want,
                          const std::vector<TraceRequest>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    const TraceRequest& a = want[i];
    const TraceRequest& b = got[i];
    ASSERT_EQ(a.arrival_ns, b.arrival_ns) << what << " request " << i;
    ASSERT_EQ(a.input_tokens, b.input_tokens) << what << " request " << i;
    ASSERT_EQ(a.output_tokens, b.output_tokens) << what << " request " << i;
    ASSERT_EQ(a.priority, b.priority) << what << " request " << i;
    ASSERT_EQ(a.hash_block_size, b.hash_block_size) << what << " request " << i;
    ASSERT_TRUE(same_ptr_contents(a.hash_ids, b.hash_ids)) << what << " request " << i;
    ASSERT_TRUE(same_ptr_contents(a.prompt_token_ids, b.prompt_token_ids))
        << what << " request " << i;
    ASSERT_EQ(a.session_id, b.session_id) << what << " request " << i;
    ASSERT_EQ(a.source_line, b.source_line) << what << " request " << i;
  }
}

void expect_same_header(const Trace& whole, const Trace& header, const std::string& what) {
  EXPECT_TRUE(header.requests.empty()) << what;
  EXPECT_EQ(whole.format, header.format) << what;
  EXPECT_EQ(whole.arrival_mode, header.arrival_mode) << what;
  EXPECT_EQ(whole.path, header.path) << what;
  EXPECT_EQ(whole.rows_read, header.rows_read) << what;
  EXPECT_EQ(whole.dropped, header.dropped) << what;
  EXPECT_EQ(whole.bad_row_examples, header.bad_row_examples) << what;
  EXPECT_EQ(whole.clock_start_unix_ns, header.clock_start_unix_ns) << what;
}

// Opens `path` under `o`, its requests held (the default bound) and streamed (bound 0), and
// compares everything with read_trace; false when it does not stream (then read_trace must
// have had to sort it).
bool check_same_as_read_trace(const std::string& path, const TraceReadOptions& o,
                              const std::string& what) {
  const Trace whole = read_trace(path, o);
  for (const int64_t bound : {TraceStream::kMaxHeldBytes, int64_t{0}}) {
    const std::string how = what + (bound > 0 ? " (held)" : " (streamed)");
    const std::optional<TraceStream> s = TraceStream::open(path, o, bound);
    if (!s) return false;
    EXPECT_EQ(s->holds_requests(), bound > 0) << how;
    expect_same_header(whole, s->header(), how);
    EXPECT_EQ(s->num_requests(), static_cast<int64_t>(whole.requests.size())) << how;
    if (!whole.requests.empty()) {
      EXPECT_EQ(s->default_max_model_len(), default_max_model_len(whole)) << how;
    }
    expect_same_requests(whole.requests, streamed(*s), how);
    // A second replay pass gives the same again (for_each is const and repeatable).
    expect_same_requests(whole.requests, streamed(*s), how + ", second pass");
  }
  return true;
}

std::vector<std::pair<std::string, TraceReadOptions>> option_sets() {
  std::vector<std::pair<std::string, TraceReadOptions>> sets;
  sets.emplace_back("default", TraceReadOptions{});
  TraceReadOptions o;
  o.start_s = 30;
  o.duration_s = 120;
  sets.emplace_back("window", o);
  o = {};
  o.start_s = 45.5;
  sets.emplace_back("start only", o);
  o = {};
  o.max_requests = 57;
  sets.emplace_back("max_requests", o);
  o = {};
  o.start_s = 10;
  o.duration_s = 600;
  o.max_requests = 40;
  o.time_scale = 0.37;
  sets.emplace_back("window+max+scale", o);
  o = {};
  o.arrival = ArrivalMode::ALL_AT_ONCE;
  o.max_requests = 100;
  sets.emplace_back("all-at-once", o);
  o = {};
  o.arrival = ArrivalMode::POISSON;
  o.rate = 3.5;
  o.seed = 11;
  o.time_scale = 2;
  sets.emplace_back("poisson", o);
  o = {};
  o.arrival = ArrivalMode::POISSON;
  o.rate = 7;
  o.start_s = 20;
  o.duration_s = 50;
  sets.emplace_back("poisson in a window", o);
  return sets;
}

TEST(TraceStream, EveryBundledTraceStreamsExactlyWhatReadTraceReturns) {
  // Every bundled trace keeps file order, so all of them stream (none is read whole).
  for (const char* name : {"AzureLLMInferenceTrace_conv.csv", "AzureLLMInferenceTrace_code.csv",
                           "BurstGPT_1.head400.csv", "conversation_trace.jsonl",
                           "sharegpt_8k_filtered_stats_llama2_tokenizer.csv", "splitwise_conv.csv",
                           "splitwise_code.csv"}) {
    const bool no_arrivals = std::string(name).starts_with("sharegpt");
    for (const auto& [label, o] : option_sets()) {
      const std::string what = std::string(name) + " / " + label;
      if (no_arrivals && (o.start_s > 0 || o.duration_s > 0)) {
        // Refused by both, with the same message.
        std::string want;
        try {
          read_trace(bundled(name), o);
        } catch (const std::invalid_argument& e) {
          want = e.what();
        }
        ASSERT_FALSE(want.empty()) << what;
        try {
          TraceStream::open(bundled(name), o);
          ADD_FAILURE() << what << ": no error";
        } catch (const std::invalid_argument& e) {
          EXPECT_EQ(want, e.what()) << what;
        }
        continue;
      }
      EXPECT_TRUE(check_same_as_read_trace(bundled(name), o, what)) << what << " did not stream";
    }
  }
}

// The bound on held requests: a trace within it is held, one beyond it (even by one request) is
// streamed, and both hand over the same requests as a trace that is always streamed.
TEST(TraceStream, HeldAndStreamedTracesGiveTheSameRequests) {
  for (const char* name :
       {"AzureLLMInferenceTrace_conv.csv", "BurstGPT_1.head400.csv", "conversation_trace.jsonl"}) {
    for (const auto& [label, o] : option_sets()) {
      const std::string what = std::string(name) + " / " + label;
      const std::optional<TraceStream> always = TraceStream::open(bundled(name), o, 0);
      ASSERT_TRUE(always.has_value()) << what;
      ASSERT_FALSE(always->holds_requests()) << what;
      const std::vector<TraceRequest> want = streamed(*always);
      ASSERT_EQ(static_cast<int64_t>(want.size()), always->num_requests()) << what;
      // What the held requests take, counted as open() does.
      int64_t bytes = 0;
      for (const TraceRequest& r : want) {
        bytes += static_cast<int64_t>(sizeof(TraceRequest) + r.session_id.size());
        if (r.hash_ids) bytes += static_cast<int64_t>(r.hash_ids->size() * sizeof(uint64_t));
        if (r.prompt_token_ids) {
          bytes += static_cast<int64_t>(r.prompt_token_ids->size() * sizeof(int32_t));
        }
      }
      for (const int64_t bound : {bytes, bytes - 1, bytes / 2, TraceStream::kMaxHeldBytes}) {
        const std::optional<TraceStream> s = TraceStream::open(bundled(name), o, bound);
        ASSERT_TRUE(s.has_value()) << what;
        EXPECT_EQ(s->holds_requests(), bound > 0 && bound >= bytes) << what << " bound " << bound;
        EXPECT_EQ(s->num_requests(), always->num_requests()) << what;
        expect_same_requests(want, streamed(*s), what + " bound " + std::to_string(bound));
      }
    }
  }
}

class TraceStreamFiles : public kvsim_test::ScratchDirTest {};

// Trace::clock_start_unix_ns: Azure's absolute TIMESTAMP of the first request kept (window
// included, time scale not), the same whole and streamed; unset for relative-seconds layouts and
// synthetic arrivals.
TEST(TraceClock, AzureKeepsTheFirstKeptRequestsTimestamp) {
  const std::string azure = bundled("AzureLLMInferenceTrace_conv.csv");
  const auto clock = [](const std::string& path, const TraceReadOptions& o) {
    const std::optional<int64_t> whole = read_trace(path, o).clock_start_unix_ns;
    const std::optional<TraceStream> s = TraceStream::open(path, o);
    EXPECT_TRUE(s.has_value()) << path;
    if (s) {
      EXPECT_EQ(s->header().clock_start_unix_ns, whole) << path;
    }
    return whole;
  };
  // The file's first row: 2023-11-16 18:15:46.6805900 (UTC) = 1700158546 s.
  constexpr int64_t kFirst = int64_t{1700158546} * 1'000'000'000 + 680'590'000;
  TraceReadOptions o;
  EXPECT_EQ(clock(azure, o), kFirst);
  o.time_scale = 0.5;  // t = 0 keeps its time; later stamps run on the scaled clock
  o.max_requests = 10;
  EXPECT_EQ(clock(azure, o), kFirst);
  // --start 20: the first arrival at or after 18:16:06.6805900 is line 33's 18:16:07.1595310.
  o = {};
  o.start_s = 20;
  EXPECT_EQ(clock(azure, o), int64_t{1700158567} * 1'000'000'000 + 159'531'000);
  EXPECT_EQ(read_trace(azure, o).requests.front().source_line, 33);
  o.duration_s = 1e-3;  // an empty window: no request, no clock
  EXPECT_EQ(clock(azure, o), std::nullopt);

  o = {};
  o.arrival = ArrivalMode::POISSON;
  o.rate = 2;
  EXPECT_EQ(clock(azure, o), std::nullopt);
  o = {};
  o.arrival = ArrivalMode::ALL_AT_ONCE;
  EXPECT_EQ(clock(azure, o), std::nullopt);
  EXPECT_EQ(clock(bundled("BurstGPT_1.head400.csv"), {}), std::nullopt);
  EXPECT_EQ(clock(bundled("conversation_trace.jsonl"), {}), std::nullopt);
}

TEST_F(TraceStreamFiles, ATraceOutOfFileOrderIsNotStreamed) {
  const std::string p = write("unsorted.csv",
                              "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                              "2023-11-16 18:15:46.6805900,374,44\n"
                              "2023-11-16 18:15:50.9951690,396,109\n"
                              "2023-11-16 18:15:48.0000000,879,45\n");
  EXPECT_FALSE(TraceStream::open(p).has_value());
  // Equal arrivals keep file order: they stream.
  const std::string q = write("ties.csv",
                              "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                              "2023-11-16 18:15:46.6805900,374,44\n"
                              "2023-11-16 18:15:46.6805900,396,109\n"
                              "2023-11-16 18:15:48.0000000,879,45\n");
  EXPECT_TRUE(check_same_as_read_trace(q, {}, "ties"));
}

TEST_F(TraceStreamFiles, BadRowsAreSkippedAndCountedAsReadTraceDoes) {
  const std::string p = write("bad.csv",
                              "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                              "2023-11-16 18:15:46.6805900,374,44\n"
                              "2023-11-16 18:15:47.0,abc,44\n"
                              "\n"
                              "2023-11-16 18:15:48.0,12,-3\n"
                              "2023-11-16 18:15:49.0,10,3\n");
  TraceReadOptions o;
  o.skip_bad_rows = true;
  EXPECT_TRUE(check_same_as_read_trace(p, o, "skip bad rows"));
  // Without skipping, both raise the first bad row's error.
  std::string want;
  try {
    read_trace(p);
  } catch (const TraceError& e) {
    want = e.what();
  }
  ASSERT_FALSE(want.empty());
  try {
    TraceStream::open(p);
    ADD_FAILURE() << "no error";
  } catch (const TraceError& e) {
    EXPECT_EQ(want, e.what());
  }
}

// The errors read_trace raises after parsing (rebase, Poisson arrivals, time scale, the
// default max_model_len) come out of the validation pass, the same and in the same order.
TEST_F(TraceStreamFiles, DeferredErrorsMatchReadTrace) {
  struct Case {
    std::string name;
    std::string text;
    TraceReadOptions options;
  };
  std::vector<Case> cases;
  // Arrival more than 2^62 ns after the first (kvsim JSONL arrivals are seconds).
  cases.push_back({"rebase.jsonl",
                   "{\"arrival_s\": 0.0, \"input_tokens\": 5, \"output_tokens\": 2}\n"
                   "{\"arrival_s\": 5000000000.0, \"input_tokens\": 5, \"output_tokens\": 2}\n",
                   {}});
  // A bad row after the rebase error: the parse error wins, as in read_trace.
  cases.push_back({"rebase_then_bad.jsonl",
                   "{\"arrival_s\": 0.0, \"input_tokens\": 5, \"output_tokens\": 2}\n"
                   "{\"arrival_s\": 5000000000.0, \"input_tokens\": 5, \"output_tokens\": 2}\n"
                   "{\"arrival_s\": 5000000001.0, \"input_tokens\": \"x\", \"output_tokens\": 2}\n",
                   {}});
  TraceReadOptions scale;
  scale.time_scale = 1e9;
  cases.push_back({"scale.jsonl",
                   "{\"arrival_s\": 0.0, \"input_tokens\": 5, \"output_tokens\": 2}\n"
                   "{\"arrival_s\": 4000000000.0, \"input_tokens\": 5, \"output_tokens\": 2}\n",
                   scale});
  TraceReadOptions slow;
  slow.arrival = ArrivalMode::POISSON;
  slow.rate = 1e-18;
  slow.seed = 3;
  cases.push_back({"poisson.jsonl",
                   "{\"arrival_s\": 0.0, \"input_tokens\": 5, \"output_tokens\": 2}\n"
                   "{\"arrival_s\": 1.0, \"input_tokens\": 5, \"output_tokens\": 2}\n"
                   "{\"arrival_s\": 2.0, \"input_tokens\": 5, \"output_tokens\": 2}\n",
                   slow});
  TraceReadOptions forced;
  forced.hash_block_size = 16;
  cases.push_back({"forced_hash.jsonl",
                   "{\"arrival_s\": 0.0, \"input_tokens\": 5, \"output_tokens\": 2}\n", forced});
  cases.push_back({"empty.csv", "", {}});
  cases.push_back({"header_only.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n", {}});
  for (const Case& c : cases) {
    const std::string p = write(c.name, c.text);
    std::string want;
    try {
      read_trace(p, c.options);
    } catch (const std::exception& e) {
      want = e.what();
    }
    ASSERT_FALSE(want.empty()) << c.name << ": read_trace raised nothing";
    std::string got;
    try {
      TraceStream::open(p, c.options);
    } catch (const std::exception& e) {
      got = e.what();
    }
    EXPECT_EQ(want, got) << c.name;
  }
  // The default max_model_len's error names the same request.
  const std::string p = write("huge.jsonl",
                              "{\"arrival_s\": 0.0, \"input_tokens\": 5, \"output_tokens\": 2}\n"
                              "{\"arrival_s\": 1.0, \"input_tokens\": 2147483000, "
                              "\"output_tokens\": 2000}\n");
  const Trace whole = read_trace(p);
  const std::optional<TraceStream> s = TraceStream::open(p);
  ASSERT_TRUE(s.has_value());
  std::string want;
  std::string got;
  try {
    default_max_model_len(whole);
  } catch (const TraceError& e) {
    want = e.what();
  }
  try {
    s->default_max_model_len();
  } catch (const TraceError& e) {
    got = e.what();
  }
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(want, got);
}

TEST_F(TraceStreamFiles, AStreamedTraceThatChangesBetweenThePassesIsAnError) {
  const std::string p = write("t.jsonl",
                              "{\"arrival_s\": 0.0, \"input_tokens\": 5, \"output_tokens\": 2}\n"
                              "{\"arrival_s\": 1.0, \"input_tokens\": 6, \"output_tokens\": 2}\n");
  const std::optional<TraceStream> s = TraceStream::open(p, {}, /*max_held_bytes=*/0);
  ASSERT_TRUE(s.has_value());
  const std::optional<TraceStream> held = TraceStream::open(p);
  ASSERT_TRUE(held.has_value() && held->holds_requests());
  write("t.jsonl", "{\"arrival_s\": 0.0, \"input_tokens\": 5, \"output_tokens\": 2}\n");
  try {
    streamed(*s);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("changed while it was replayed"), std::string::npos)
        << e.what();
  }
  // A held trace does not read the file again: it replays what was validated.
  const std::vector<TraceRequest> got = streamed(*held);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].input_tokens, 6);
}

// The streaming replay against the whole-trace one on random traces: every timeline row and
// summary field equal (wall time aside), invariants checked every step, and slots reused.
struct StreamOutputs {
  std::string timeline;
  std::string requests;
  std::string summary;
  int64_t request_slots = 0;
  int64_t preemptions = 0;
};

StreamOutputs stream_outputs_of(const ReplayResult& r) {
  StreamOutputs out;
  std::ostringstream tl;
  write_timeline_csv(tl, r.timeline);
  out.timeline = tl.str();
  std::ostringstream rq;
  write_requests_csv(rq, r.requests);
  out.requests = rq.str();
  ReplaySummary s = r.summary;
  s.wall_seconds = 0;
  out.request_slots = s.request_slots;
  out.preemptions = s.preemptions;
  ReportContext ctx;
  out.summary = replay_summary_json(s, ctx).dump();
  return out;
}

TEST_F(TraceStreamFiles, StreamingReplaysAreIdenticalToWholeTraceReplays) {
  std::mt19937_64 rng(20261201);
  int reused = 0;
  int preempting = 0;
  const int kTraces = 120;
  for (int i = 0; i < kTraces; ++i) {
    Trace t = test::random_trace(rng, test::DrawOrder::kInputFirst);
    // Longer traces than the property tests' 30: slots must be reused many times over.
    Trace more = test::random_trace(rng, test::DrawOrder::kInputFirst);
    for (TraceRequest r : more.requests) {
      r.arrival_ns += t.requests.back().arrival_ns + 5'000'000;
      t.requests.push_back(std::move(r));
    }
    const std::string p = write("r" + std::to_string(i) + ".jsonl", "");
    write_kvsim_jsonl(p, t.requests);
    ReplayConfig c;
    SchedulerConfig& sc = c.scheduler;
    sc.block_size = 16;
    sc.num_gpu_blocks = static_cast<int32_t>(std::uniform_int_distribution<int>(8, 40)(rng));
    // 96: some requests stop at max_model_len, which async mode can find with a batch still in
    // flight that names them (their slot must not be reused before it is processed).
    sc.max_model_len = i % 5 < 2 ? 96 : 128;
    sc.max_num_batched_tokens = std::uniform_int_distribution<int>(0, 1)(rng) ? 64 : 256;
    sc.max_num_seqs = std::uniform_int_distribution<int>(2, 8)(rng);
    sc.enable_prefix_caching = i % 3 != 0;
    sc.async_scheduling = i % 2 == 0;
    sc.policy = i % 4 == 1 ? SchedulingPolicy::PRIORITY : SchedulingPolicy::FCFS;
    c.record_timeline = true;
    c.record_requests = i % 4 != 3;  // records copied out of reused slots, or none
    c.check_invariants = true;
    FixedStepTime step(10.0);
    NullKvBackend null;
    const Trace whole = read_trace(p);
    const std::optional<TraceStream> s = TraceStream::open(p);
    ASSERT_TRUE(s.has_value());
    const StreamOutputs a = stream_outputs_of(run_replay(c, whole, null, step));
    const StreamOutputs b = stream_outputs_of(run_replay(c, *s, null, step));
    ASSERT_EQ(a.summary, b.summary) << "trace " << i;
    ASSERT_EQ(a.timeline, b.timeline) << "trace " << i;
    ASSERT_EQ(a.requests, b.requests) << "trace " << i;
    // Held (the default for these small traces) or read again: the same replay.
    const std::optional<TraceStream> reread = TraceStream::open(p, {}, /*max_held_bytes=*/0);
    ASSERT_TRUE(reread.has_value() && s->holds_requests() && !reread->holds_requests());
    const StreamOutputs b2 = stream_outputs_of(run_replay(c, *reread, null, step));
    ASSERT_EQ(b.summary, b2.summary) << "trace " << i;
    ASSERT_EQ(b.timeline, b2.timeline) << "trace " << i;
    ASSERT_EQ(b.requests, b2.requests) << "trace " << i;
    if (c.record_requests) {
      // Records to a sink (the CLI's --requests): the held rows' bytes, through either driver,
      // and nothing held.
      for (const bool use_stream : {true, false}) {
        std::ostringstream os;
        RequestsCsvWriter w(os);
        ReplayConfig sc2 = c;
        sc2.request_sink = &w;
        const ReplayResult r =
            use_stream ? run_replay(sc2, *s, null, step) : run_replay(sc2, whole, null, step);
        w.finish();
        EXPECT_TRUE(r.requests.empty()) << "trace " << i;
        EXPECT_EQ(w.rows(), static_cast<int64_t>(whole.requests.size())) << "trace " << i;
        ASSERT_EQ(os.str(), a.requests) << "trace " << i << " stream " << use_stream;
      }
    }
    EXPECT_EQ(a.request_slots, static_cast<int64_t>(whole.requests.size()));
    EXPECT_LE(b.request_slots, a.request_slots);
    reused += b.request_slots < a.request_slots;
    preempting += a.preemptions > 0;
  }
  // The cases must exercise what they are for: reuse and preemption.
  EXPECT_GE(reused, kTraces / 2);
  EXPECT_GE(preempting, 10);
}

// A request sink gets the records in trace order however late an early request finishes: one
// long request first, then 300 short ones that all finish before it (the streaming driver's
// reorder ring grows past its first 64 places), rejected ones among them.
TEST_F(TraceStreamFiles, RequestSinkGetsRecordsInTraceOrderWhenEarlyOnesFinishLast) {
  std::vector<TraceRequest> reqs;
  for (int i = 0; i < 301; ++i) {
    TraceRequest r;
    r.arrival_ns = int64_t{i} * 1'000'000;
    r.input_tokens = i % 50 == 7 ? 5000 : 16;  // over max_model_len: rejected at arrival
    r.output_tokens = i == 0 ? 2000 : 2;
    reqs.push_back(r);
  }
  const std::string p = write("late_first.jsonl", "");
  write_kvsim_jsonl(p, reqs);
  for (const bool async_scheduling : {true, false}) {
    ReplayConfig c;
    SchedulerConfig& sc = c.scheduler;
    sc.block_size = 16;
    sc.num_gpu_blocks = 400;
    sc.max_model_len = 4096;
    sc.max_num_batched_tokens = 2048;
    sc.max_num_seqs = 8;
    sc.async_scheduling = async_scheduling;
    c.record_timeline = false;
    c.record_requests = true;
    FixedStepTime step(10.0);
    NullKvBackend null;
    const ReplayResult held = run_replay(c, read_trace(p), null, step);
    ASSERT_EQ(held.requests.size(), reqs.size());
    ASSERT_GT(held.requests[0].finish_ns, held.requests[200].finish_ns);  // finished last
    ASSERT_TRUE(held.requests[7].rejected);
    std::ostringstream want;
    write_requests_csv(want, held.requests);
    const std::optional<TraceStream> s = TraceStream::open(p);
    ASSERT_TRUE(s.has_value());
    std::ostringstream os;
    RequestsCsvWriter w(os);
    c.request_sink = &w;
    const ReplayResult streamed = run_replay(c, *s, null, step);
    w.finish();
    EXPECT_TRUE(streamed.requests.empty());
    EXPECT_LT(streamed.summary.request_slots, 301);  // slots were reused meanwhile
    EXPECT_EQ(os.str(), want.str()) << "async " << async_scheduling;
  }
}

// Every request has its record, in trace order, rejected ones included (a prompt over
// max_model_len), and unfinished ones at the end of a livelocked replay would be too.
TEST_F(TraceStreamFiles, StreamingReplayKeepsEveryRecordInTraceOrder) {
  std::string text;
  for (int i = 0; i < 40; ++i) {
    text += "{\"arrival_s\": " + std::to_string(i) +
            ".0, \"input_tokens\": " + std::to_string(i % 7 == 3 ? 100 : 5 + i) +
            ", \"output_tokens\": 2}\n";
  }
  const std::string p = write("t.jsonl", text);
  const std::optional<TraceStream> s = TraceStream::open(p);
  ASSERT_TRUE(s.has_value());
  ReplayConfig c;
  c.scheduler.num_gpu_blocks = 10;
  c.scheduler.max_model_len = 64;
  c.record_requests = true;
  FixedStepTime step(10.0);
  NullKvBackend null;
  const ReplayResult r = run_replay(c, *s, null, step);
  ASSERT_EQ(r.requests.size(), 40u);
  EXPECT_LT(r.summary.request_slots, 40);  // slots were reused
  int rejected = 0;
  for (size_t i = 0; i < r.requests.size(); ++i) {
    EXPECT_EQ(r.requests[i].request_id, static_cast<int64_t>(i));
    EXPECT_EQ(r.requests[i].source_line, static_cast<int64_t>(i) + 1);
    EXPECT_TRUE(r.requests[i].finished || r.requests[i].rejected) << i;
    rejected += r.requests[i].rejected ? 1 : 0;
  }
  EXPECT_EQ(rejected, 6);
}

}  // namespace
}  // namespace kvsim
