// The streamed timeline (issue 27): TimelineCsvWriter as a replay's ReplayConfig::timeline_sink
// writes, during the replay, the same bytes as write_timeline_csv over the held rows, for both
// replay drivers (whole trace and streamed trace), sync and async, swap mode included, and over
// many 256 KiB flushes; the held timeline stays empty; an exception from the sink ends the
// replay; rows buffered at an error are not written.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <thread>
#include <vector>

#include "bundled_trace.h"
#include "kvsim/core/kv_backend.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/report/report.h"
#include "kvsim/sim/traces/trace.h"
#include "kvsim/sim/traces/trace_stream.h"
#include "random_trace.h"

namespace kvsim {
namespace {

std::string held_csv(const ReplayResult& r) {
  std::ostringstream os;
  write_timeline_csv(os, r.timeline);
  return os.str();
}

ReplayConfig small_config(bool async_scheduling) {
  ReplayConfig c;
  SchedulerConfig& sc = c.scheduler;
  sc.block_size = 16;
  sc.num_gpu_blocks = 400;
  sc.max_model_len = 8192;
  sc.max_num_batched_tokens = 2048;
  sc.max_num_seqs = 64;
  sc.async_scheduling = async_scheduling;
  c.record_timeline = true;
  c.record_requests = false;
  return c;
}

// A row of every field set (wide values, every admission stop), so the writer's formatting is
// the held writer's over the whole range.
TimelineRow odd_row(int64_t i) {
  TimelineRow r;
  r.step = i;
  r.time_ns = i * 1'000'000'007 + (i % 3 == 0 ? INT64_C(9'000'000'000'000'000'000) : 0);
  r.duration_ns = i % 7;
  r.running = static_cast<int32_t>(i % 1000);
  r.waiting = INT32_MAX - static_cast<int32_t>(i % 5);
  r.scheduled_reqs = -1;
  r.scheduled_tokens = INT64_MAX - i;
  r.prefill_tokens = i * 13;
  r.decode_tokens = 0;
  r.used_blocks = static_cast<int32_t>(i);
  r.free_blocks = INT32_MIN + static_cast<int32_t>(i % 9);
  r.cached_blocks = INT64_MIN + i;
  r.padding_tokens = i % 16;
  r.preemptions = static_cast<int32_t>(i % 2);
  r.admission_stop = static_cast<AdmissionStop>(i % 5);
  r.swap_out_blocks = 3;
  r.swap_in_blocks = 4;
  r.host_slots_used = i * 1000;
  return r;
}

// odd_row(0..n-1), and the inline writer's bytes for them.
std::vector<TimelineRow> odd_rows(size_t n) {
  std::vector<TimelineRow> rows;
  for (size_t i = 0; i < n; ++i) rows.push_back(odd_row(static_cast<int64_t>(i)));
  return rows;
}
std::string inline_csv(const std::vector<TimelineRow>& rows) {
  std::ostringstream os;
  write_timeline_csv(os, rows);
  return os.str();
}

TEST(TimelineCsvWriter, RowByRowEqualsTheHeldWriterAcrossManyFlushes) {
  std::vector<TimelineRow> rows;
  for (int64_t i = 0; i < 40'000; ++i) rows.push_back(odd_row(i));  // ~5 MB: 20 flushes
  std::ostringstream held;
  write_timeline_csv(held, rows);
  std::ostringstream streamed;
  TimelineCsvWriter w(streamed);
  EXPECT_EQ(streamed.str().find('\n') + 1, streamed.str().size()) << "the header comes first";
  for (const TimelineRow& r : rows) w.add(r);
  EXPECT_LT(streamed.str().size(), held.str().size()) << "rows are buffered until finish()";
  w.finish();
  w.finish();  // a second finish writes nothing
  EXPECT_EQ(w.rows(), 40'000);
  EXPECT_EQ(streamed.str(), held.str());
  EXPECT_THROW(w.add(rows[0]), std::logic_error);
  // No rows: the header alone.
  std::ostringstream empty_held;
  write_timeline_csv(empty_held, {});
  std::ostringstream empty;
  TimelineCsvWriter(empty).finish();
  EXPECT_EQ(empty.str(), empty_held.str());
}

// The row formatter (a table for small values, std::to_chars beyond) against fmt's "{}" and
// format_seconds, field by field, over every width and sign.
std::string fmt_row(const TimelineRow& r) {
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.step,
                     format_seconds(r.time_ns), format_seconds(r.duration_ns), r.running, r.waiting,
                     r.scheduled_reqs, r.scheduled_tokens, r.prefill_tokens, r.decode_tokens,
                     r.used_blocks, r.free_blocks, r.cached_blocks, r.padding_tokens, r.preemptions,
                     to_string(r.admission_stop), r.swap_out_blocks, r.swap_in_blocks,
                     r.host_slots_used);
}

// write_timeline_csv's text of `rows`, the header left out.
std::string written_rows(const std::vector<TimelineRow>& rows) {
  std::ostringstream os;
  write_timeline_csv(os, rows);
  const std::string got = os.str();
  return got.substr(got.find('\n') + 1);
}

TEST(TimelineCsvWriter, FieldsAreFmtsDecimalText) {
  std::vector<int64_t> values = {0,     1,      9,         10,        11,        99,       100,
                                 101,   999,    1000,      1001,      9999,      10000,    10001,
                                 99999, 100000, -1,        -9,        -10,       -99,      -100,
                                 -9999, -10000, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN};
  std::mt19937_64 rng(27);
  for (int i = 0; i < 2000; ++i) {
    // At most 18 digits: 19 could exceed INT64_MAX (signed overflow; the extremes are listed).
    const int digits = std::uniform_int_distribution<int>(0, 17)(rng);
    int64_t v = std::uniform_int_distribution<int64_t>(0, 9)(rng);
    for (int d = 0; d < digits; ++d) v = v * 10 + std::uniform_int_distribution<int64_t>(0, 9)(rng);
    values.push_back(i % 3 == 0 ? -v : v);
  }
  const auto i32 = [](int64_t v) { return static_cast<int32_t>(v); };
  std::vector<TimelineRow> rows;
  std::string want;
  for (size_t k = 0; k < values.size(); ++k) {
    const int64_t v = values[k];
    const int64_t w = values[(k * 7 + 3) % values.size()];
    TimelineRow r;
    r.step = v;
    r.time_ns = w;  // negative: empty, as format_seconds
    r.duration_ns = v < 0 ? -(v + 1) : v;
    r.running = i32(v);
    r.waiting = i32(w);
    r.scheduled_reqs = i32(v / 7);
    r.scheduled_tokens = w;
    r.prefill_tokens = v / 3;
    r.decode_tokens = -(v / 11);
    r.used_blocks = i32(w / 5);
    r.free_blocks = i32(v % 100000);
    r.cached_blocks = w / 13;
    r.padding_tokens = v % 1000;
    r.preemptions = i32(w % 10000);
    r.admission_stop = static_cast<AdmissionStop>(k % 5);
    r.swap_out_blocks = i32(v % 10);
    r.swap_in_blocks = i32(w % 100);
    r.host_slots_used = v / 2;
    rows.push_back(r);
    want += fmt_row(r);
  }
  for (int64_t ns : {INT64_C(999'999'999), INT64_C(1'000'000'000), INT64_C(1'000'000'001),
                     INT64_C(10'000'000), INT64_C(123'456'789'012), INT64_C(9'999'999'999'999)}) {
    TimelineRow r;
    r.time_ns = ns;
    r.duration_ns = ns / 7;
    rows.push_back(r);
    want += fmt_row(r);
  }
  ASSERT_EQ(written_rows(rows), want);
}

// Every count below 10000 (the formatter's table) and around it, and fractions of a second with
// every leading digit and every run of zeros, against fmt.
TEST(TimelineCsvWriter, EverySmallCountAndFractionIsFmtsText) {
  std::vector<TimelineRow> rows;
  std::string want;
  for (int64_t v = -3; v < 10'050; ++v) {
    TimelineRow r;
    r.step = v * 3;  // not consecutive: formatted, not incremented
    r.running = static_cast<int32_t>(v);
    r.used_blocks = static_cast<int32_t>(10'049 - v);
    r.padding_tokens = v * 7;
    // Fractions 0.000000000 .. 0.999999999 in uneven strides, and whole seconds up to 10^5.
    r.time_ns = v * 99'990'001 + v % 10 * 1'000'000'000;
    r.duration_ns = (v * 100'003) % 1'000'000'000;
    rows.push_back(r);
    want += fmt_row(r);
  }
  ASSERT_EQ(written_rows(rows), want);
}

// Rows as a replay logs them: steps one apart across every carry (9 -> 10 ... INT64_MAX), most
// fields repeating the previous row's value, the rest changing now and then (the formatter
// reuses a field's text while its value stays; it must never print a stale one), and jumps back
// and forth in between (a cluster timeline interleaves replicas).
TEST(TimelineCsvWriter, RepeatedFieldsAndConsecutiveStepsAreFmtsText) {
  std::mt19937_64 rng(2712);
  std::vector<TimelineRow> rows;
  std::string want;
  TimelineRow r;
  auto emit = [&] {
    rows.push_back(r);
    want += fmt_row(r);
  };
  const int64_t starts[] = {
      0, 7, 95, 995, 9'995, 99'995, 999'990, 9'999'999'990, -12, INT64_MAX - 3, INT64_MIN, 123'456};
  std::uniform_int_distribution<int> pick(0, 99);
  for (const int64_t start : starts) {
    r.step = start;
    for (int k = 0; k < 40; ++k) {
      emit();
      if (r.step == INT64_MAX) break;
      ++r.step;
      r.time_ns += r.duration_ns;
      // Each field changes with its own odds, as counts do from one step to the next.
      if (pick(rng) < 20) r.duration_ns = pick(rng) < 50 ? 10'000'000 : pick(rng) * 1'000'003;
      if (pick(rng) < 10) r.running += pick(rng) < 50 ? 1 : -1;
      if (pick(rng) < 10) r.waiting = pick(rng) - 50;
      if (pick(rng) < 30) r.scheduled_reqs = pick(rng);
      if (pick(rng) < 30) r.scheduled_tokens = pick(rng) * 37;
      if (pick(rng) < 30) r.prefill_tokens = pick(rng) < 50 ? 0 : pick(rng) * 101;
      if (pick(rng) < 30) r.decode_tokens = pick(rng);
      if (pick(rng) < 60) r.used_blocks += pick(rng) % 3;
      if (pick(rng) < 60) r.free_blocks = 2047 - r.used_blocks;
      if (pick(rng) < 60) r.cached_blocks += 1;
      r.padding_tokens = pick(rng) % 16;
      if (pick(rng) < 5) r.preemptions = pick(rng) % 2;
      if (pick(rng) < 25) r.admission_stop = static_cast<AdmissionStop>(pick(rng) % 5);
      if (pick(rng) < 5) r.swap_out_blocks = pick(rng) < 50 ? 0 : INT32_MAX;
      if (pick(rng) < 5) r.swap_in_blocks = pick(rng) < 50 ? 0 : INT32_MIN;
      if (pick(rng) < 5) r.host_slots_used = pick(rng) < 50 ? 0 : INT64_MIN + pick(rng);
      if (pick(rng) < 3) r.time_ns = -1;  // never: empty
    }
  }
  ASSERT_EQ(written_rows(rows), want);
  // Row by row through the streaming writer as well.
  std::ostringstream streamed;
  TimelineCsvWriter w(streamed);
  for (const TimelineRow& row : rows) w.add(row);
  w.finish();
  std::ostringstream held;
  write_timeline_csv(held, rows);
  EXPECT_EQ(streamed.str(), held.str());
}

// Steady decode steps, as a quiet run logs them: the step and the clock move every row, the
// padding and the blocks often, each mostly within its number of digits (the formatter then
// writes only those columns over the last row's text), with a length change, a group change
// (an arrival, a preemption) or a never-time now and then; across flushes, inline and in the
// background.
TEST(TimelineCsvWriter, SteadyStepsKeepingTheirLengthsAreFmtsText) {
  std::mt19937_64 rng(2727);
  std::uniform_int_distribution<int> pick(0, 999);
  std::vector<TimelineRow> rows;
  std::string want;
  TimelineRow r;
  r.step = 9'990;
  r.time_ns = 99'950'000'000;
  r.duration_ns = 10'000'000;
  r.running = r.scheduled_reqs = r.decode_tokens = 17;
  r.scheduled_tokens = 17;
  r.used_blocks = 1326;
  r.free_blocks = 721;
  r.cached_blocks = 2031;
  r.padding_tokens = 162;
  for (int k = 0; k < 30'000; ++k) {
    rows.push_back(r);
    want += fmt_row(r);
    ++r.step;
    r.time_ns += r.duration_ns;
    r.padding_tokens -= r.running;
    if (r.padding_tokens < 0) r.padding_tokens += 16 * r.running;
    const int u = pick(rng);
    if (u < 80) {  // a new block
      ++r.used_blocks;
      --r.free_blocks;
    } else if (u < 120) {  // a finish
      r.used_blocks -= 60;
      r.free_blocks += 60;
      if (r.used_blocks < 0) r.used_blocks = 1990, r.free_blocks = 57;
    }
    if (u < 200) r.cached_blocks += u % 3 == 0 ? -1 : 1;
    if (u == 500) r.duration_ns = 9'999'999;  // a length change
    if (u == 501) r.duration_ns = 10'000'000;
    if (u == 502) r.running = r.scheduled_reqs = r.decode_tokens = r.scheduled_tokens = 9;
    if (u == 503) r.running = r.scheduled_reqs = r.decode_tokens = r.scheduled_tokens = 17;
    if (u == 504) r.preemptions = 1 - r.preemptions;
    if (u == 505) r.time_ns = -1;  // never: empty, and back to a time on the next step
    if (r.time_ns < 0 && u != 505) r.time_ns = r.step * 10'000'000;
    if (u == 506) r.step += 1'000'000'000;  // a jump
  }
  ASSERT_EQ(written_rows(rows), want);
  std::ostringstream held;
  write_timeline_csv(held, rows);
  for (const auto mode : {TimelineCsvWriter::Mode::kInline, TimelineCsvWriter::Mode::kBackground}) {
    std::ostringstream streamed;
    TimelineCsvWriter w(streamed, mode);
    for (const TimelineRow& row : rows) w.put(row);
    w.finish();
    EXPECT_EQ(streamed.str(), held.str());
  }
}

TEST(TimelineCsvWriter, RowsNotFinishedAreNotWritten) {
  std::ostringstream os;
  {
    TimelineCsvWriter w(os);
    w.add(odd_row(1));
  }
  std::ostringstream header_only;
  write_timeline_csv(header_only, {});
  EXPECT_EQ(os.str(), header_only.str());
}

// The sink against the held timeline on random traces (both drivers, both modes, swap too).
TEST(TimelineSink, RandomReplaysStreamTheHeldBytes) {
  std::mt19937_64 rng(20261202);
  for (int i = 0; i < 60; ++i) {
    const Trace t = test::random_trace(rng, test::DrawOrder::kInputFirst);
    ReplayConfig c = small_config(i % 2 == 0);
    c.scheduler.num_gpu_blocks = static_cast<int32_t>(8 + i % 30);
    c.scheduler.max_model_len = 128;
    c.scheduler.max_num_batched_tokens = i % 3 == 0 ? 64 : 256;
    c.scheduler.max_num_seqs = 2 + i % 7;
    c.scheduler.enable_prefix_caching = i % 3 != 0;
    if (i % 4 == 3) {
      c.scheduler.preemption_mode = PreemptionMode::SWAP;
      c.scheduler.num_host_swap_slots = 16;
      c.swap_bytes_per_block = 1 << 20;
    }
    c.record_requests = true;
    FixedStepTime step(10.0);
    NullKvBackend null;
    const ReplayResult held = run_replay(c, t, null, step);
    std::ostringstream os;
    TimelineCsvWriter w(
        os, i % 2 == 1 ? TimelineCsvWriter::Mode::kBackground : TimelineCsvWriter::Mode::kInline);
    ReplayConfig sc = c;
    sc.timeline_sink = &w;
    const ReplayResult streamed = run_replay(sc, t, null, step);
    w.finish();
    EXPECT_TRUE(streamed.timeline.empty()) << "trace " << i;
    EXPECT_EQ(w.rows(), static_cast<int64_t>(held.timeline.size())) << "trace " << i;
    ASSERT_EQ(os.str(), held_csv(held)) << "trace " << i;
    EXPECT_EQ(streamed.summary.steps, held.summary.steps) << "trace " << i;
    EXPECT_EQ(streamed.requests.size(), held.requests.size()) << "trace " << i;
  }
}

// A bundled trace of thousands of steps, through the whole-trace and the streaming driver.
TEST(TimelineSink, BothDriversStreamTheHeldBytesOfABundledTrace) {
  const std::string path = bundled("BurstGPT_1.head400.csv");
  const Trace whole = read_trace(path);
  const std::optional<TraceStream> stream = TraceStream::open(path);
  ASSERT_TRUE(stream.has_value());
  for (const bool async_scheduling : {true, false}) {
    const ReplayConfig c = small_config(async_scheduling);
    FixedStepTime step(10.0);
    NullKvBackend null;
    const ReplayResult held = run_replay(c, whole, null, step);
    ASSERT_GT(held.timeline.size(), 1000u);
    const std::string want = held_csv(held);
    for (const bool use_stream : {false, true}) {
      std::ostringstream os;
      // The streaming driver with the background writer, the whole-trace one inline.
      TimelineCsvWriter w(
          os, use_stream ? TimelineCsvWriter::Mode::kBackground : TimelineCsvWriter::Mode::kInline);
      ReplayConfig sc = c;
      sc.timeline_sink = &w;
      const ReplayResult r =
          use_stream ? run_replay(sc, *stream, null, step) : run_replay(sc, whole, null, step);
      w.finish();
      EXPECT_TRUE(r.timeline.empty());
      EXPECT_EQ(r.summary.steps, held.summary.steps);
      EXPECT_EQ(os.str(), want) << "async " << async_scheduling << " stream " << use_stream;
    }
  }
}

// The background writer: the inline writer's bytes over many chunks (a partial last one
// included), nothing written twice or lost, and the stream untouched until finish() returns.
TEST(TimelineCsvWriter, BackgroundWritesTheInlineBytes) {
  const size_t chunk = TimelineCsvWriter::kRowsPerChunk;
  for (const size_t n : {size_t{0}, size_t{1}, chunk - 1, chunk, chunk + 1,
                         chunk * (TimelineCsvWriter::kChunksInFlight + 3) + 17}) {
    const std::vector<TimelineRow> rows = odd_rows(n);
    std::ostringstream os;
    TimelineCsvWriter w(os, TimelineCsvWriter::Mode::kBackground);
    for (const TimelineRow& r : rows) w.add(r);
    w.finish();
    w.finish();
    EXPECT_EQ(w.rows(), static_cast<int64_t>(n));
    EXPECT_EQ(os.str(), inline_csv(rows)) << n << " rows";
    EXPECT_THROW(w.add(rows.empty() ? TimelineRow{} : rows[0]), std::logic_error);
  }
}

// A stream slower than the rows come: add() waits for the thread (kChunksInFlight chunks
// queued), which the thread, polling rather than woken per chunk, must wake from that wait as it
// frees each chunk. The bytes are still the inline writer's, and nothing hangs.
TEST(TimelineCsvWriter, BackgroundBehindASlowStreamWritesTheInlineBytes) {
  // Every write to the file takes 2 ms.
  class SlowBuf : public std::stringbuf {
   protected:
    std::streamsize xsputn(const char* s, std::streamsize n) override {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      ++writes;
      return std::stringbuf::xsputn(s, n);
    }

   public:
    int writes = 0;
  };
  const size_t n = TimelineCsvWriter::kRowsPerChunk * (TimelineCsvWriter::kChunksInFlight + 4) + 5;
  const std::vector<TimelineRow> rows = odd_rows(n);
  SlowBuf buf;
  std::ostream os(&buf);
  TimelineCsvWriter w(os, TimelineCsvWriter::Mode::kBackground);
  const auto start = std::chrono::steady_clock::now();
  for (const TimelineRow& r : rows) w.add(r);
  const auto added = std::chrono::steady_clock::now() - start;
  w.finish();
  EXPECT_EQ(w.rows(), static_cast<int64_t>(n));
  EXPECT_EQ(buf.str(), inline_csv(rows));
  // The thread had written at least the chunks add() waited for: four chunks of these rows are
  // well over 2 * 256 KiB, i.e. several 2 ms writes, before the last row went in.
  EXPECT_GE(added, std::chrono::milliseconds(4));
  EXPECT_GE(buf.writes, 8);
}

// Rows that come slowly: the thread, finding no chunk for a while, stops polling and sleeps;
// the next chunk handed over wakes it (its bytes reach the stream before finish()), and the
// bytes are the inline writer's.
TEST(TimelineCsvWriter, BackgroundAsleepIsWokenByTheNextChunk) {
  // Counts the bytes written, readable from this thread while the writer's thread writes.
  class CountingBuf : public std::stringbuf {
   protected:
    std::streamsize xsputn(const char* s, std::streamsize n) override {
      const std::streamsize put = std::stringbuf::xsputn(s, n);
      written.fetch_add(static_cast<size_t>(put));
      return put;
    }
    int_type overflow(int_type c) override {
      if (!traits_type::eq_int_type(c, traits_type::eof())) written.fetch_add(1);
      return std::stringbuf::overflow(c);
    }

   public:
    std::atomic<size_t> written{0};
  };
  const size_t chunk = TimelineCsvWriter::kRowsPerChunk;
  const std::vector<TimelineRow> rows = odd_rows(3 * chunk);
  CountingBuf buf;
  std::ostream os(&buf);
  TimelineCsvWriter w(os, TimelineCsvWriter::Mode::kBackground);
  // The bytes the stream holds once `at_least` is reached, waiting up to 10 s for them.
  const auto reaches = [&](size_t at_least) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (buf.written.load() < at_least && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return buf.written.load() >= at_least;
  };
  size_t next = 0;
  for (int round = 0; round < 2; ++round) {
    // One chunk and one row more: the chunk is handed over.
    const size_t before = buf.written.load();
    for (const size_t end = next + chunk + (round == 0 ? 1 : 0); next < end; ++next) {
      w.add(rows[next]);
    }
    // A chunk of these rows is over 256 KiB, so its formatting writes to the stream.
    EXPECT_TRUE(reaches(before + 1)) << "round " << round;
    // Long enough for the thread to give up polling and sleep.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (; next < rows.size(); ++next) w.add(rows[next]);
  w.finish();
  EXPECT_EQ(w.rows(), static_cast<int64_t>(rows.size()));
  EXPECT_EQ(buf.str(), inline_csv(rows));
}

// Destroyed without finish() (the replay failed): the thread stops, the unwritten rows are
// dropped, nothing hangs - with the thread behind, idle, or never given a chunk.
TEST(TimelineCsvWriter, BackgroundDestroyedWithoutFinishStops) {
  for (const size_t n : {size_t{0}, size_t{5}, TimelineCsvWriter::kRowsPerChunk * 9}) {
    std::ostringstream os;
    {
      TimelineCsvWriter w(os, TimelineCsvWriter::Mode::kBackground);
      for (size_t i = 0; i < n; ++i) w.add(odd_row(static_cast<int64_t>(i)));
    }
    std::ostringstream header_only;
    write_timeline_csv(header_only, {});
    EXPECT_EQ(os.str().substr(0, header_only.str().size()), header_only.str());
    EXPECT_LE(os.str().size(), header_only.str().size() + n * 1024);  // rows are under 1 KiB
  }
}

#if defined(__linux__)
// The CPUs a thread may run on, from /proc (Cpus_allowed_list: "0-3,5").
std::set<int> allowed_cpus(const std::filesystem::path& task) {
  std::ifstream in(task / "status");
  std::string line;
  std::set<int> cpus;
  while (std::getline(in, line)) {
    if (line.rfind("Cpus_allowed_list:", 0) != 0) continue;
    std::istringstream list(line.substr(line.find(':') + 1));
    std::string range;
    while (std::getline(list, range, ',')) {
      const size_t dash = range.find('-');
      const int lo = std::stoi(range.substr(0, dash));
      const int hi = dash == std::string::npos ? lo : std::stoi(range.substr(dash + 1));
      for (int c = lo; c <= hi; ++c) cpus.insert(c);
    }
  }
  return cpus;
}

// The background thread carries its name and, where this process may use two CPUs or more,
// every allowed CPU but one (the constructing thread's at construction): it cannot be placed on
// the replay's CPU and preempt it there.
TEST(TimelineCsvWriter, BackgroundThreadKeepsOffTheConstructingCpu) {
  const std::set<int> process = allowed_cpus("/proc/thread-self");
  std::ostringstream os;
  TimelineCsvWriter w(os, TimelineCsvWriter::Mode::kBackground);
  std::optional<std::filesystem::path> writer;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name == TimelineCsvWriter::kThreadName) writer = task.path();
  }
  ASSERT_TRUE(writer.has_value()) << "no thread named " << TimelineCsvWriter::kThreadName;
  const std::set<int> cpus = allowed_cpus(*writer);
  ASSERT_FALSE(cpus.empty());
  EXPECT_TRUE(std::includes(process.begin(), process.end(), cpus.begin(), cpus.end()));
  EXPECT_EQ(cpus.size(), process.size() >= 2 ? process.size() - 1 : process.size());
  w.add(odd_row(1));
  w.finish();
  EXPECT_NE(os.str().find('\n'), std::string::npos);
}
#endif

// A stream that throws (exceptions enabled) once past some bytes: the error the thread meets
// comes back from add() or finish(), never lost, and nothing hangs afterwards.
class FailingBuf : public std::streambuf {
 public:
  explicit FailingBuf(size_t limit) : limit_(limit) {}

 protected:
  std::streamsize xsputn(const char*, std::streamsize n) override {
    written_ += static_cast<size_t>(n);
    return written_ > limit_ ? 0 : n;
  }
  int_type overflow(int_type c) override {
    return xsputn(nullptr, 1) == 1 ? c : traits_type::eof();
  }

 private:
  size_t limit_;
  size_t written_ = 0;
};

TEST(TimelineCsvWriter, BackgroundWriteErrorsComeBack) {
  FailingBuf buf(1 << 20);
  std::ostream os(&buf);
  os.exceptions(std::ios::badbit);
  bool threw = false;
  try {
    TimelineCsvWriter w(os, TimelineCsvWriter::Mode::kBackground);
    for (int64_t i = 0; i < 200'000; ++i) w.add(odd_row(i));
    w.finish();
  } catch (const std::ios_base::failure&) {
    threw = true;
  }
  EXPECT_TRUE(threw);
}

// put() (the replay's way in: rows stored in the writer's chunk without a call) and add() mixed,
// across chunk boundaries: the inline bytes, rows() counting both as they come, and after a
// failed write every later row, put or added, rethrows.
TEST(TimelineCsvWriter, PutAndAddMixedWriteTheInlineBytes) {
  const size_t n = TimelineCsvWriter::kRowsPerChunk * (TimelineCsvWriter::kChunksInFlight + 2) + 5;
  const std::vector<TimelineRow> rows = odd_rows(n);
  std::ostringstream os;
  TimelineCsvWriter w(os, TimelineCsvWriter::Mode::kBackground);
  TimelineSink& sink = w;
  for (size_t i = 0; i < n; ++i) {
    if (i % 7 == 3) {
      w.add(rows[i]);
    } else {
      sink.put(rows[i]);
    }
    if (i % 1000 == 0) {
      ASSERT_EQ(w.rows(), static_cast<int64_t>(i + 1));
    }
  }
  EXPECT_EQ(w.rows(), static_cast<int64_t>(n));
  w.finish();
  EXPECT_EQ(w.rows(), static_cast<int64_t>(n));
  EXPECT_EQ(os.str(), inline_csv(rows));
  EXPECT_THROW(sink.put(rows[0]), std::logic_error);

  FailingBuf buf(1 << 16);
  std::ostream failing(&buf);
  failing.exceptions(std::ios::badbit);
  TimelineCsvWriter f(failing, TimelineCsvWriter::Mode::kBackground);
  TimelineSink& fs = f;
  int failures = 0;
  for (int64_t i = 0; i < 100'000; ++i) {
    try {
      fs.put(odd_row(i));
    } catch (const std::ios_base::failure&) {
      ++failures;
    }
  }
  // The first failure ends the chunks: each later row reaches add(), which rethrows.
  EXPECT_GT(failures, 1);
  EXPECT_THROW(f.finish(), std::ios_base::failure);
}

// put_successor() (a quiet step's row: the last row with the step one more and only the clock,
// the duration and the four block columns moved, stored as a 32-byte entry) mixed with put() and
// add(), across chunk boundaries and the formatter's length changes and carries, and with counts
// an entry cannot hold (beyond int32: the row goes whole): fmt's bytes in both modes, and rows()
// counting every row.
TEST(TimelineCsvWriter, SuccessorsWriteFmtsText) {
  std::mt19937_64 rng(3317);
  std::uniform_int_distribution<int> pick(0, 999);
  const size_t n = TimelineCsvWriter::kRowsPerChunk * (TimelineCsvWriter::kChunksInFlight + 2) + 9;
  std::vector<TimelineRow> rows;
  std::vector<int> how;  // 0 put, 1 add, 2 put_successor
  TimelineRow r = odd_row(5);
  r.step = 98;
  for (size_t i = 0; i < n; ++i) {
    const int u = pick(rng);
    if (i == 0 || u < 40) {  // a general step's row: anything may change
      r = odd_row(static_cast<int64_t>(i));
      r.step = rows.empty() ? 98 : rows.back().step + 1 + (u == 7 ? 1000 : 0);
      how.push_back(u % 2);
    } else {  // a successor
      r.step += 1;
      r.time_ns += 9'999'990 + u;
      r.duration_ns = u < 500 ? 10'000'000 : 9'999'999 + u;
      r.used_blocks = u == 41 ? 0 : r.used_blocks + (u % 3) - 1;
      if (r.used_blocks < 0) r.used_blocks = 5;
      r.free_blocks = 2047 - r.used_blocks;
      r.cached_blocks = u == 42       ? INT64_C(1) << 40
                        : u == 43     ? -3
                        : u % 100 < 5 ? u
                                      : r.cached_blocks;
      r.padding_tokens = u == 44 ? INT64_C(3) << 31 : (r.padding_tokens + 15) % 16 + u % 1000;
      how.push_back(2);
    }
    rows.push_back(r);
  }
  std::string want;
  for (const TimelineRow& row : rows) want += fmt_row(row);
  for (const auto mode : {TimelineCsvWriter::Mode::kInline, TimelineCsvWriter::Mode::kBackground}) {
    std::ostringstream os;
    TimelineCsvWriter w(os, mode);
    TimelineSink& sink = w;
    for (size_t i = 0; i < n; ++i) {
      if (how[i] == 0) {
        sink.put(rows[i]);
      } else if (how[i] == 1) {
        w.add(rows[i]);
      } else {
        sink.put_successor(rows[i]);
      }
      if (i % 997 == 0) {
        ASSERT_EQ(w.rows(), static_cast<int64_t>(i + 1));
      }
    }
    w.finish();
    EXPECT_EQ(w.rows(), static_cast<int64_t>(n));
    const std::string got = os.str();
    EXPECT_EQ(got.substr(got.find('\n') + 1), want);
    EXPECT_THROW(sink.put_successor(rows.back()), std::logic_error);
  }
}

struct ThrowingSink : TimelineSink {
  int64_t rows = 0;
  void add(const TimelineRow&) override {
    if (++rows == 10) throw std::runtime_error("disk on fire");
  }
};

TEST(TimelineSink, AnExceptionFromTheSinkEndsTheReplay) {
  const Trace whole = read_trace(bundled("BurstGPT_1.head400.csv"));
  ReplayConfig c = small_config(true);
  ThrowingSink sink;
  c.timeline_sink = &sink;
  FixedStepTime step(10.0);
  NullKvBackend null;
  EXPECT_THROW(run_replay(c, whole, null, step), std::runtime_error);
  EXPECT_EQ(sink.rows, 10);
}

TEST(TimelineSink, NoRowsWithoutRecordTimeline) {
  const Trace whole = read_trace(bundled("BurstGPT_1.head400.csv"));
  ReplayConfig c = small_config(false);
  c.record_timeline = false;
  ThrowingSink sink;
  c.timeline_sink = &sink;
  FixedStepTime step(10.0);
  NullKvBackend null;
  const ReplayResult r = run_replay(c, whole, null, step);
  EXPECT_GT(r.summary.steps, 0);
  EXPECT_EQ(sink.rows, 0);
}

}  // namespace
}  // namespace kvsim
