// Private interface between read_trace() and the per-layout readers (CSV, JSONL).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kvsim/sim/traces/trace.h"
#include "kvsim/sim/traces/trace_line_reader.h"

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
  void add(TraceRequest&& r) { requests.push_back(std::move(r)); }
  void count_row() { ++trace_.rows_read; }

  // Arrivals are absolute in the file's own time base until read_trace() rebases them.
  std::vector<TraceRequest> requests;

 private:
  Trace& trace_;
  const TraceReadOptions& options_;
};

// Makes a value safe for a one-line error message: its first max_bytes bytes with control bytes
// and invalid UTF-8 written as \xNN, and "..." when cut.
std::string clip_for_message(std::string_view value, size_t max_bytes = 80);

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
