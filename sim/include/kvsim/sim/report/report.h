// Reports of one replay: the human report, the JSON summary, the per-step timeline CSV and the
// per-request CSV. Every writer is a pure function of its inputs, so the same replay gives the
// same bytes; the only exception is `wall_seconds`, the last key of the JSON summary (the human
// report leaves wall time out; the CLI prints it on stderr).
//
// JSON keys relied on by other tools (never rename): requests, finished, rejected, steps,
// sim_seconds, wall_seconds, num_gpu_blocks, block_size, peak_running, mean_running,
// formula_max_concurrency, vllm_max_concurrency, preemptions, recomputed_tokens,
// padding_tokens_mean, padding_fraction_mean, peak_kv_usage, prefix_cache_hit_rate, ttft_p50_s,
// ttft_p99_s, tpot_p50_s. `itl` is an alias of `tpot` (same values): the per-request mean
// inter-token latency, which equals TPOT because kvsim records no per-token timestamps.
// With a host/cuda backend: `num_layers` and `backend_layers` (the backend_* numbers cover
// backend_layers of num_layers, unscaled: see ReportContext).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kvsim/sim/engine/replay.h"

namespace kvsim {

// What the replay does not know by itself: where the trace and the pool came from.
struct ReportContext {
  std::string trace_path;
  std::string trace_format;
  int64_t trace_rows = 0;
  std::string dropped_rows;  // describe_dropped(), may be empty
  // Trace::dropped: rows dropped by reason (the JSON's rows_dropped_by_reason).
  std::map<std::string, int64_t> dropped_by_reason;
  std::string model;
  std::string gpu;
  std::string kv_cache_dtype;
  bool pool_overridden = false;  // --num-gpu-blocks-override
  // The lesson's N_seq = floor(KV budget / (kappa * L)); with an overridden pool the same
  // formula over the pool: floor(N * block_size / L).
  int64_t formula_max_concurrency = 0;
  double vllm_max_concurrency = 0;          // N / cdiv(L, block_size)
  std::vector<std::string> vllm_log_lines;  // "GPU KV cache size: ..." and "Maximum ..."
  SchedulerConfig scheduler;  // its preemption_mode selects the swap part of the report
  std::string preemption_mode = "recompute";
  // A host/cuda backend may keep only some layers (--backend-max-layers): its bytes and device
  // time cover `backend_layers` of the model's `num_layers` and are reported unscaled (the
  // full model's would be about num_layers / backend_layers times larger). 0 = not known.
  int64_t num_layers = 0;
  int64_t backend_layers = 0;
};

// For stderr, when --skip-bad-rows dropped malformed rows: "<prefix>: <describe_dropped>; first
// bad rows:" then each of trace.bad_row_examples verbatim on its own line, indented by two
// spaces. Empty when there are no examples.
std::string format_bad_rows(const Trace& trace, std::string_view prefix);

nlohmann::ordered_json replay_summary_json(const ReplaySummary& s, const ReportContext& ctx);

std::string format_replay_report(const ReplaySummary& s, const ReportContext& ctx);

// "step,time_s,duration_s,running,waiting,scheduled_reqs,scheduled_tokens,prefill_tokens,
//  decode_tokens,used_blocks,free_blocks,cached_blocks,padding_tokens,preemptions,
//  admission_stop,swap_out_blocks,swap_in_blocks,host_slots_used" then one row per TimelineRow.
//  Times are exact decimal seconds.
void write_timeline_csv(std::ostream& os, std::span<const TimelineRow> rows);

namespace detail {
class TimelineRowFormatter;  // sim/src/report/report_csv_rows.h
}  // namespace detail

// The same CSV written as the rows come: the header at construction, then each row formatted
// straight into one buffer (std::to_chars, no per-field strings) that goes out in 256 KiB
// chunks, the rest at finish(). write_timeline_csv is this writer over a span, so both give the
// same bytes. As a replay's ReplayConfig::timeline_sink it writes the timeline during the replay
// instead of from 350k held rows (the CLI's --timeline, issue 27).
// kBackground formats and writes on a second thread: a row goes into a chunk of kRowsPerChunk
// entries (the room put() and put_successor() fill without a call; add() when it is full: a quiet
// step's row is a 32-byte TimelineStepDelta, a third of a row, so the replay's thread moves less
// memory to the other core) and full chunks go over (at most kChunksInFlight at a time, so memory
// stays bounded: add() waits when the thread is that far behind), without waking the thread,
// which looks for them every 100 us: the replay's thread makes no system call per chunk (after
// 2 ms without one the thread sleeps until the next chunk wakes it). The bytes and their order
// are
// kInline's; the replay's thread no longer pays for the formatting and the writes, a second core
// does (the CPU is the same, the wall time is the replay's). A failed write is the stream's state,
// the caller's to check after finish() (the stream is the thread's until then); an exception on the
// thread comes back from the next add() or finish(). Rows not yet written when the writer is
// destroyed without finish() (an error, an interrupt) are dropped.
class TimelineCsvWriter final : public TimelineSink {
 public:
  enum class Mode { kInline, kBackground };
  static constexpr size_t kRowsPerChunk = 4096;
  static constexpr size_t kChunksInFlight = 4;
  // kBackground's thread, by name (Linux: /proc/<pid>/task/<tid>/comm); it runs on any allowed
  // CPU but the one that constructed the writer, where there is another.
  static constexpr const char* kThreadName = "kvsim-timeline";

  explicit TimelineCsvWriter(std::ostream& os, Mode mode = Mode::kInline);
  TimelineCsvWriter(const TimelineCsvWriter&) = delete;
  TimelineCsvWriter& operator=(const TimelineCsvWriter&) = delete;
  ~TimelineCsvWriter() override;
  // Also takes put_successor()'s rows that found no room.
  void add(const TimelineRow& row) override;
  // Writes the rows still buffered (once, after the last row; add() may not follow).
  void finish();
  int64_t rows() const;

 private:
  class Background;
  void format(const TimelineRow& row);  // into buf_, written out at kCsvFlushBytes
  void format_successor(const TimelineStepDelta& d);
  void write_buffered();
  // kBackground: a full chunk (or none yet, or a failed thread) is handed over and the next one's
  // room offered.
  void take_room();
  size_t entries_filled() const;

  // The caller's (add, finish).
  std::unique_ptr<Background> background_;  // null: kInline
  int64_t rows_ = 0;  // kBackground: the rows of the chunks handed over, not of next_'s
  bool finished_ = false;
  // The formatting's: the writer thread's in kBackground, where format() stores size_ every row.
  // On a cache line apart from the caller's fields: sharing one made every row a cache miss on
  // both threads (issue 27).
  alignas(64) std::unique_ptr<char[]> buf_;
  std::ostream& os_;
  std::unique_ptr<detail::TimelineRowFormatter> formatter_;
  size_t size_ = 0;
};

// One row per request: ids, lengths, clock times, latencies, preemptions, token counts, status,
// swap-outs (last column).
void write_requests_csv(std::ostream& os, std::span<const RequestRecord> records);

// The same CSV written as the records come (write_requests_csv is this writer over a span): the
// header at construction, each row formatted into one buffer written out in 256 KiB pieces, the
// rest at finish(). As a replay's ReplayConfig::request_sink it writes the rows during the replay
// instead of from a record per trace request held to the end (the CLI's --requests). A failed
// write is the stream's state, the caller's to check after finish().
class RequestsCsvWriter final : public RequestSink {
 public:
  explicit RequestsCsvWriter(std::ostream& os);
  RequestsCsvWriter(const RequestsCsvWriter&) = delete;
  RequestsCsvWriter& operator=(const RequestsCsvWriter&) = delete;
  void add(const RequestRecord& record) override;
  // Writes the rows still buffered (once, after the last record; add() may not follow).
  void finish();
  int64_t rows() const { return rows_; }

 private:
  std::ostream& os_;
  fmt::memory_buffer buf_;
  int64_t rows_ = 0;
  bool finished_ = false;
};

std::string_view to_string(AdmissionStop s);

// ns as exact decimal seconds: 1500000 -> "0.001500000"; -1 (never) -> "".
std::string format_seconds(int64_t ns);

}  // namespace kvsim
