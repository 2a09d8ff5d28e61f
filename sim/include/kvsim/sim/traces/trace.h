// Request traces: the normalised record every reader produces, the read options, and the entry
// point read_trace(). Formats and their mapping are documented in docs/traces.md.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kvsim/sim/io/line_reader.h"

namespace kvsim {

// The on-disk layouts kvsim reads. AUTO detects the layout from the header (CSV) or the keys of
// the first record (JSONL).
enum class TraceFormat : uint8_t {
  AUTO,
  AZURE,     // Azure LLM inference CSV 2023/2024: TIMESTAMP,ContextTokens,GeneratedTokens
  VIDUR,     // Vidur CSV: arrived_at,num_prefill_tokens,num_decode_tokens
  BURSTGPT,  // BurstGPT CSV (6- or 8-column layout, read by column name)
  MOONCAKE,  // Mooncake JSONL: timestamp (ms), input_length, output_length, hash_ids (512)
  BAILIAN,   // Alibaba Bailian JSONL: timestamp (s), input_length, output_length, hash_ids (16)
  SHAREGPT,  // length table: num_prefill_tokens,num_decode_tokens,... (no arrivals)
  KVSIM,     // kvsim's native JSONL (written by `kvsim gen`)
};

// "auto", "azure", ... (the --format spelling).
std::string_view to_string(TraceFormat format);
// Inverse of to_string; throws std::invalid_argument naming the valid spellings.
TraceFormat parse_trace_format(std::string_view name);

// How arrival times are assigned after reading.
enum class ArrivalMode : uint8_t {
  TRACE,        // the trace's timestamps (formats without timestamps fall back to ALL_AT_ONCE)
  ALL_AT_ONCE,  // every arrival is 0; file order is kept (the offline capacity question)
  POISSON,      // synthetic Poisson arrivals at `rate` req/s, seeded, in file order
};
std::string_view to_string(ArrivalMode mode);
ArrivalMode parse_arrival_mode(std::string_view name);

// The latest arrival a trace may have, relative to its first request: 2^62 ns (about 146 years).
// It leaves the replay clock 2^62 ns of headroom for steps after the last arrival.
inline constexpr int64_t kMaxArrivalNs = int64_t{1} << 62;

// The file's names for a layout's arrival, input-length and output-length fields (for messages);
// arrival is empty for layouts without timestamps.
struct TraceFieldNames {
  std::string_view arrival;
  std::string_view input;
  std::string_view output;
};
TraceFieldNames trace_field_names(TraceFormat format);

// A malformed input. what() is one line: "FILE:LINE: field 'NAME': problem (got 'VALUE')"; the
// value is cut to ~80 characters and control or invalid UTF-8 bytes in it are shown as \xNN.
class TraceError : public std::runtime_error {
 public:
  TraceError(std::string path, int64_t line, std::string field, std::string problem,
             std::string_view value);
  const std::string& path() const { return path_; }
  int64_t line() const { return line_; }
  const std::string& field() const { return field_; }
  const std::string& problem() const { return problem_; }
  // "field 'NAME': problem": what --skip-bad-rows counts rows by.
  std::string reason() const;

 private:
  std::string path_;
  int64_t line_;
  std::string field_;
  std::string problem_;
};

// One request of a trace, normalised across formats.
// Invariants (after read_trace): 0 <= arrival_ns <= kMaxArrivalNs, non-decreasing along
// Trace::requests;
// input_tokens >= 0, output_tokens >= 0 (recorded faithfully: 0 is for the caller to judge);
// if hash_ids is set, hash_block_size > 0 and hash_ids->size() covers the prompt in blocks of
// hash_block_size tokens (the last one may be partial); if prompt_token_ids is set, its size is
// input_tokens.
// A new field must also be held by TraceStream (HeldRequest or the extras test in open()).
struct TraceRequest {
  int64_t arrival_ns = 0;  // relative to the first request, exact integer nanoseconds
  int32_t input_tokens = 0;
  int32_t output_tokens = 0;
  int32_t priority = 0;  // lower is served first (vLLM priority policy); 0 when absent
  std::shared_ptr<const std::vector<uint64_t>> hash_ids;  // prefix-chained block ids, optional
  int32_t hash_block_size = 0;                            // tokens per hash id (0: none)
  std::shared_ptr<const std::vector<int32_t>> prompt_token_ids;  // optional
  std::string session_id;   // optional (BurstGPT `Session ID`, kvsim `session_id`)
  int64_t source_line = 0;  // 1-based line in the file (header is line 1 for CSV)
};

// A whole trace in arrival order (stable: file order breaks ties; file order for ALL_AT_ONCE
// and POISSON).
struct Trace {
  std::vector<TraceRequest> requests;
  TraceFormat format = TraceFormat::AUTO;         // the format actually read (never AUTO)
  ArrivalMode arrival_mode = ArrivalMode::TRACE;  // the mode actually applied
  std::string path;
  int64_t rows_read = 0;  // data rows seen in the file (header excluded)
  // Rows not turned into requests, by reason. BurstGPT failures ("failed request (zero response
  // tokens)") are always dropped; malformed rows only with skip_bad_rows. Rows cut by the
  // window or max_requests are not counted here.
  std::map<std::string, int64_t> dropped;
  std::vector<std::string> bad_row_examples;  // the first few skipped-row messages, verbatim
  // The wall-clock time of replay t = 0, in ns since the Unix epoch (UTC): the absolute arrival
  // of the first request kept (after the window). Set only for a trace whose arrivals are
  // absolute datetimes (Azure's TIMESTAMP) replayed with its own arrivals (ArrivalMode::TRACE)
  // and at least one request; relative-seconds layouts (BurstGPT, Mooncake, Vidur, ...),
  // all-at-once and Poisson leave it unset. time_scale does not move it: a later arrival t is at
  // clock_start_unix_ns + t on the scaled clock, not at its own TIMESTAMP unless time_scale is 1.
  std::optional<int64_t> clock_start_unix_ns;

  int64_t dropped_total() const;
};

struct TraceReadOptions {
  TraceFormat format = TraceFormat::AUTO;
  // Tokens per hash id; 0 = the format's default (Mooncake 512, Bailian 16, kvsim per record).
  int32_t hash_block_size = 0;
  bool skip_bad_rows = false;  // count malformed rows by reason and go on, instead of throwing
  int64_t max_requests = 0;    // 0 = all; applied after the window, in arrival order
  double start_s = 0;          // window start, seconds from the first arrival
  double duration_s = 0;       // window length; 0 = to the end
  double time_scale = 1.0;     // arrivals are multiplied by it (0.5 = twice as fast)
  ArrivalMode arrival = ArrivalMode::TRACE;
  double rate = 0;  // req/s for ArrivalMode::POISSON
  uint64_t seed = 0;
  InputLimits limits;  // size and line-length caps on the file (--max-input-bytes/-line-bytes)
};

// Reads a trace file (plain or gzip-compressed, detected by magic bytes). Throws TraceError on
// malformed input (unless skip_bad_rows), std::invalid_argument on bad options, and
// std::runtime_error when the file cannot be read.
Trace read_trace(const std::string& path, const TraceReadOptions& options = {});

// Detects the format from the first non-empty line of a file (a CSV header or a JSON object),
// which is line `line_number` of `path` (for messages). Throws TraceError when nothing matches
// or the line is malformed JSON (with the parser's message).
TraceFormat detect_trace_format(std::string_view first_line, const std::string& path,
                                int64_t line_number = 1);

// One line describing dropped rows, e.g. "17 rows dropped: 17 failed request (...)"; empty when
// nothing was dropped.
std::string describe_dropped(const Trace& trace);

}  // namespace kvsim
