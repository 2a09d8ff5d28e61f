// Private interface between read_trace() and the per-layout readers (CSV, JSONL).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvsim/sim/io/line_reader.h"
#include "kvsim/sim/traces/trace.h"

namespace kvsim::detail {

// What the layout readers share: the options, and where skipped rows are counted.
class RowSink {
 public:
  RowSink(Trace& trace, const TraceReadOptions& options) : trace_(trace), options_(options) {}
  const TraceReadOptions& options() const { return options_; }
  // A malformed row: rethrows unless skip_bad_rows, else counts it by reason.
  void bad_row(const TraceError& error);
  // A well-formed row that is not a request (e.g. a BurstGPT failure): always counted.
  void drop(const std::string& reason) { ++trace_.dropped[reason]; }
  void add(TraceRequest&& r) {
    if (on_request) {
      on_request(std::move(r));
    } else {
      requests.push_back(std::move(r));
    }
  }
  void count_row() { ++trace_.rows_read; }

  // Arrivals are absolute in the file's own time base until read_trace() rebases them.
  std::vector<TraceRequest> requests;
  // When set, each request goes here (in file order) instead of into `requests` (TraceStream).
  std::function<void(TraceRequest&&)> on_request;

 private:
  Trace& trace_;
  const TraceReadOptions& options_;
};

// The steps read_trace() and TraceStream share (trace_read.cpp).
// Throws std::invalid_argument for options out of range (negative sizes, a bad window, scale or
// rate).
void validate_read_options(const TraceReadOptions& options);
// Seconds to whole nanoseconds (validated: finite, >= 0, a positive value not rounding to 0);
// errors name the parameter `id` (core/param.h).
int64_t seconds_to_ns(double s, std::string_view id);
// Opens `path`, detects its layout (or takes options.format) and hands every row to `sink` in
// file order; sets trace.path and trace.format (rows and drops are counted through the sink).
// Returns whether the layout carries arrivals. Throws TraceError for an empty file or a file
// without records, and whatever the layout readers throw.
bool read_rows(const std::string& path, const TraceReadOptions& options, Trace& trace,
               RowSink& sink);
// After read_rows: refuses a forced hash block size on a trace without hash_ids and a window on
// one without arrivals (std::invalid_argument), and sets trace.arrival_mode.
void resolve_arrival_mode(const TraceReadOptions& options, bool has_arrivals, bool any_requests,
                          bool any_hash_ids, Trace& trace);
// arrival_ns -= base, or the TraceError read_trace throws when the result leaves
// [0, kMaxArrivalNs] (arrival_ns unchanged then).
std::optional<TraceError> rebase_arrival(int64_t& arrival_ns, int64_t base, int64_t source_line,
                                         const std::string& path, TraceFormat format);
// --time-scale applied to one arrival; std::invalid_argument naming the line beyond 2^62 ns.
int64_t scale_arrival(int64_t arrival_ns, double time_scale, int64_t source_line);

// Makes a value safe for a one-line error message: its first max_bytes bytes with control bytes
// and invalid UTF-8 written as \xNN, and "..." when cut. keep_param_markers: kvsim's own text
// (a TraceError's problem) keeps the parameter markers of core/param.h for the front end to spell.
std::string clip_for_message(std::string_view value, size_t max_bytes = 80,
                             bool keep_param_markers = false);

// Reads CSV layouts (AZURE, VIDUR, BURSTGPT, SHAREGPT). Returns whether rows carry arrivals.
bool read_csv_trace(LineReader& reader, TraceFormat format, RowSink& sink);
// Reads JSONL layouts (MOONCAKE, BAILIAN, KVSIM).
void read_jsonl_trace(LineReader& reader, TraceFormat format, RowSink& sink);

// Detection helpers: split a CSV header (line `line_number` of `path`; its fields trimmed; a
// malformed header, e.g. an unterminated quote, throws TraceError); inspect the first JSON object.
std::vector<std::string> split_csv_header(std::string_view line, const std::string& path,
                                          int64_t line_number);
TraceFormat detect_jsonl_format(std::string_view first_line, const std::string& path,
                                int64_t line_number);

}  // namespace kvsim::detail
