// read_trace(): detect the layout, run its reader, then normalise arrivals (sort, rebase,
// window, limit, scale, synthetic modes) as docs/traces.md and docs/scheduler.md §Clock say.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include <fmt/core.h>

#include "kvsim/core/param.h"
#include "kvsim/sim/traces/trace.h"
#include "kvsim/sim/traces/trace_parse.h"
#include "kvsim/sim/traces/trace_random.h"
#include "trace_readers.h"

namespace kvsim {
namespace {

constexpr std::pair<TraceFormat, std::string_view> kFormatNames[] = {
    {TraceFormat::AUTO, "auto"},         {TraceFormat::AZURE, "azure"},
    {TraceFormat::VIDUR, "vidur"},       {TraceFormat::BURSTGPT, "burstgpt"},
    {TraceFormat::MOONCAKE, "mooncake"}, {TraceFormat::BAILIAN, "bailian"},
    {TraceFormat::SHAREGPT, "sharegpt"}, {TraceFormat::KVSIM, "kvsim"},
};
constexpr std::pair<ArrivalMode, std::string_view> kArrivalNames[] = {
    {ArrivalMode::TRACE, "trace"},
    {ArrivalMode::ALL_AT_ONCE, "all-at-once"},
    {ArrivalMode::POISSON, "poisson"},
};
constexpr size_t kMaxBadRowExamples = 5;

bool has(const std::vector<std::string>& cols, std::string_view name) {
  return std::find(cols.begin(), cols.end(), name) != cols.end();
}

}  // namespace

namespace detail {

int64_t seconds_to_ns(double s, std::string_view id) {
  if (!std::isfinite(s) || s < 0 || s > 9.2e9) {
    throw std::invalid_argument(
        fmt::format("{} must be a finite number of seconds >= 0", param(id)));
  }
  const int64_t ns = std::llround(s * 1e9);
  // A positive length that rounds to 0 ns would silently mean "unset" (0 = to the end).
  if (s > 0 && ns == 0) {
    throw std::invalid_argument(fmt::format("{}: rounds to 0 ns; give at least 1e-9 seconds, or 0",
                                            param(id, fmt::format("{:g}", s))));
  }
  return ns;
}

void validate_read_options(const TraceReadOptions& o) {
  if (o.hash_block_size < 0)
    throw std::invalid_argument(param("hash_block_size") + " must be >= 0");
  if (o.max_requests < 0) throw std::invalid_argument(param("max_requests") + " must be >= 0");
  if (!(o.time_scale > 0) || !std::isfinite(o.time_scale)) {
    throw std::invalid_argument(
        fmt::format("{} must be > 0 (got {})", param("time_scale"), o.time_scale));
  }
  seconds_to_ns(o.start_s, "start");
  seconds_to_ns(o.duration_s, "duration");
  if (o.arrival == ArrivalMode::POISSON && (!(o.rate > 0) || !std::isfinite(o.rate))) {
    throw std::invalid_argument(fmt::format("{} needs {} > 0 requests per second (got {})",
                                            param("arrival", "poisson"), param("rate"), o.rate));
  }
}

namespace {
std::string seconds_text(int64_t ns) {
  return fmt::format("{}.{:09d} s", ns / 1'000'000'000, ns % 1'000'000'000);
}
}  // namespace

std::optional<TraceError> rebase_arrival(int64_t& arrival_ns, int64_t base, int64_t source_line,
                                         const std::string& path, TraceFormat format) {
  int64_t rel = 0;
  const bool overflow = __builtin_sub_overflow(arrival_ns, base, &rel);
  if (overflow || rel > kMaxArrivalNs) {
    return TraceError(path, source_line, std::string(trace_field_names(format).arrival),
                      "arrival more than 2^62 ns (about 146 years) after the first request",
                      overflow ? "beyond 292 years" : seconds_text(rel));
  }
  arrival_ns = rel;
  return std::nullopt;
}

int64_t scale_arrival(int64_t arrival_ns, double time_scale, int64_t source_line) {
  if (time_scale == 1.0) return arrival_ns;
  const double scaled = static_cast<double>(arrival_ns) * time_scale;
  if (scaled > static_cast<double>(kMaxArrivalNs)) {
    throw std::invalid_argument(
        fmt::format("{} puts the arrival of line {} beyond 2^62 ns (about 146 years)",
                    param("time_scale", fmt::format("{}", time_scale)), source_line));
  }
  return std::llround(scaled);
}

bool read_rows(const std::string& path, const TraceReadOptions& options, Trace& trace,
               RowSink& sink) {
  LineReader reader(path, options.limits);
  trace.path = path;
  int64_t first_line_number = 1;
  const std::string_view first = reader.first_nonblank_line(&first_line_number);
  if (trace_parse::trim(first).empty()) {
    throw TraceError(path, 1, "header", "empty file, no header or records", "");
  }
  trace.format = options.format == TraceFormat::AUTO
                     ? detect_trace_format(first, path, first_line_number)
                     : options.format;
  bool has_arrivals = true;
  switch (trace.format) {
    case TraceFormat::AZURE:
    case TraceFormat::VIDUR:
    case TraceFormat::BURSTGPT:
    case TraceFormat::SHAREGPT:
      has_arrivals = read_csv_trace(reader, trace.format, sink);
      break;
    case TraceFormat::MOONCAKE:
    case TraceFormat::BAILIAN:
    case TraceFormat::KVSIM:
      read_jsonl_trace(reader, trace.format, sink);
      break;
    case TraceFormat::AUTO:
      break;
  }
  if (trace.rows_read == 0) {
    throw TraceError(path, reader.line_number(), "records", "no records in the file", "");
  }
  return has_arrivals;
}

void resolve_arrival_mode(const TraceReadOptions& options, bool has_arrivals, bool any_requests,
                          bool any_hash_ids, Trace& trace) {
  // A forced hash block size only says how to read hash_ids: where there are none it would be
  // silently ignored, so refuse it (CSV layouts never carry hash_ids).
  if (options.hash_block_size > 0 && any_requests && !any_hash_ids) {
    throw std::invalid_argument(
        fmt::format("{} applies to traces with hash_ids, and {} ({}) has none; drop the flag",
                    param("hash_block_size", std::to_string(options.hash_block_size)), trace.path,
                    to_string(trace.format)));
  }
  trace.arrival_mode = options.arrival;
  if (!has_arrivals && options.arrival == ArrivalMode::TRACE) {
    trace.arrival_mode = ArrivalMode::ALL_AT_ONCE;  // the layout has no timestamps
  }
  if ((options.start_s > 0 || options.duration_s > 0) && !has_arrivals) {
    throw std::invalid_argument(fmt::format("{}/{} need arrival times, and {} ({}) has none",
                                            param("start"), param("duration"), trace.path,
                                            to_string(trace.format)));
  }
}

}  // namespace detail

namespace {

// Arrivals relative to the first (sorted) request, each at most kMaxArrivalNs.
void rebase(std::vector<TraceRequest>& reqs, const std::string& path, TraceFormat format) {
  if (reqs.empty()) return;
  const int64_t base = reqs.front().arrival_ns;
  for (auto& r : reqs) {
    if (const auto error =
            detail::rebase_arrival(r.arrival_ns, base, r.source_line, path, format)) {
      throw *error;
    }
  }
}

// A stable sort, skipped when the order holds already (most traces are in arrival order):
// std::stable_sort moves every request through a buffer as large as the trace even then (14 M
// instructions of the whole Azure conv replay read whole; issue 27).
template <class Less>
void stable_sort_unless_sorted(std::vector<TraceRequest>& reqs, Less less) {
  if (!std::is_sorted(reqs.begin(), reqs.end(), less)) {
    std::stable_sort(reqs.begin(), reqs.end(), less);
  }
}

void by_file_order(std::vector<TraceRequest>& reqs) {
  stable_sort_unless_sorted(reqs, [](const TraceRequest& a, const TraceRequest& b) {
    return a.source_line < b.source_line;
  });
}

}  // namespace

std::string_view to_string(TraceFormat format) {
  for (const auto& [f, name] : kFormatNames) {
    if (f == format) return name;
  }
  return "?";
}

TraceFormat parse_trace_format(std::string_view name) {
  for (const auto& [f, n] : kFormatNames) {
    if (n == name) return f;
  }
  throw std::invalid_argument(fmt::format(
      "unknown trace format '{}' (expected auto|azure|vidur|burstgpt|mooncake|bailian|sharegpt|"
      "kvsim)",
      name));
}

std::string_view to_string(ArrivalMode mode) {
  for (const auto& [m, name] : kArrivalNames) {
    if (m == mode) return name;
  }
  return "?";
}

ArrivalMode parse_arrival_mode(std::string_view name) {
  for (const auto& [m, n] : kArrivalNames) {
    if (n == name) return m;
  }
  throw std::invalid_argument(
      fmt::format("unknown arrival mode '{}' (expected trace|all-at-once|poisson)", name));
}

TraceError::TraceError(std::string path, int64_t line, std::string field, std::string problem,
                       std::string_view value)
    : std::runtime_error(fmt::format(
          "{}:{}: field '{}': {} (got '{}')", path, line, detail::clip_for_message(field),
          detail::clip_for_message(problem, 1000, /*keep_param_markers=*/true),
          detail::clip_for_message(value))),
      path_(std::move(path)),
      line_(line),
      field_(std::move(field)),
      problem_(std::move(problem)) {}

TraceFieldNames trace_field_names(TraceFormat format) {
  switch (format) {
    case TraceFormat::AZURE:
      return {"TIMESTAMP", "ContextTokens", "GeneratedTokens"};
    case TraceFormat::VIDUR:
      return {"arrived_at", "num_prefill_tokens", "num_decode_tokens"};
    case TraceFormat::BURSTGPT:
      return {"Timestamp", "Request tokens", "Response tokens"};
    case TraceFormat::SHAREGPT:
      return {"", "num_prefill_tokens", "num_decode_tokens"};
    case TraceFormat::MOONCAKE:
    case TraceFormat::BAILIAN:
      return {"timestamp", "input_length", "output_length"};
    case TraceFormat::KVSIM:
    case TraceFormat::AUTO:
      break;
  }
  return {"arrival_s", "input_tokens", "output_tokens"};
}

std::string TraceError::reason() const {
  return fmt::format("field '{}': {}", field_, problem_);
}

int64_t Trace::dropped_total() const {
  int64_t n = 0;
  for (const auto& [reason, count] : dropped) n += count;
  return n;
}

std::string describe_dropped(const Trace& trace) {
  if (trace.dropped.empty()) return {};
  std::string out = fmt::format("{} of {} rows dropped:", trace.dropped_total(), trace.rows_read);
  const char* sep = " ";
  for (const auto& [reason, count] : trace.dropped) {
    out += fmt::format("{}{} {}", sep, count, reason);
    sep = "; ";
  }
  return out;
}

namespace detail {

namespace {

// Length of the well-formed UTF-8 sequence of 2-4 bytes at s[i], or 0 (RFC 3629: no overlongs,
// no surrogates, nothing above U+10FFFF).
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(1) < lo || b(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (b(k) < 0x80 || b(k) > 0xBF) return 0;
  }
  return n;
}

}  // namespace

std::string clip_for_message(std::string_view value, size_t max_bytes, bool keep_param_markers) {
  // Printable ASCII and valid UTF-8 pass through; control bytes (NUL included, which would cut a
  // C string short) and stray bytes become \xNN, so the message stays one readable line.
  const size_t kMax = max_bytes;
  std::string out;
  size_t i = 0;
  for (; i < value.size() && i < kMax;) {
    const auto c = static_cast<unsigned char>(value[i]);
    if ((c >= 0x20 && c < 0x7F) || (keep_param_markers && c >= 0x1c && c <= 0x1f)) {
      out.push_back(static_cast<char>(c));
      ++i;
    } else if (const size_t n = c >= 0x80 ? utf8_sequence(value, i) : 0; n > 0) {
      out.append(value.substr(i, n));
      i += n;
    } else {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    }
  }
  if (i < value.size()) out += "...";
  return out;
}

void RowSink::bad_row(const TraceError& error) {
  if (!options_.skip_bad_rows) throw error;
  ++trace_.dropped[error.reason()];
  if (trace_.bad_row_examples.size() < kMaxBadRowExamples) {
    trace_.bad_row_examples.emplace_back(error.what());
  }
}

}  // namespace detail

TraceFormat detect_trace_format(std::string_view first_line, const std::string& path,
                                int64_t line_number) {
  const std::string_view line = trace_parse::trim(first_line);
  if (line.empty()) throw TraceError(path, 1, "header", "empty file, no header or records", "");
  if (line.front() == '{') return detail::detect_jsonl_format(line, path, line_number);
  const auto cols = detail::split_csv_header(line, path, line_number);
  if (has(cols, "TIMESTAMP") && has(cols, "ContextTokens")) return TraceFormat::AZURE;
  if (has(cols, "arrived_at")) return TraceFormat::VIDUR;
  if (has(cols, "Request tokens") && has(cols, "Response tokens")) return TraceFormat::BURSTGPT;
  if (has(cols, "num_prefill_tokens") && has(cols, "num_decode_tokens")) {
    return TraceFormat::SHAREGPT;
  }
  throw TraceError(path, line_number, "header",
                   "unknown trace layout (expected an Azure, Vidur, BurstGPT or ShareGPT CSV "
                   "header or a JSON object; use " +
                       param("format") + ")",
                   line);
}

Trace read_trace(const std::string& path, const TraceReadOptions& options) {
  detail::validate_read_options(options);
  Trace trace;
  detail::RowSink sink(trace, options);
  const bool has_arrivals = detail::read_rows(path, options, trace, sink);
  std::vector<TraceRequest>& reqs = sink.requests;
  detail::resolve_arrival_mode(
      options, has_arrivals, !reqs.empty(),
      std::any_of(reqs.begin(), reqs.end(), [](const TraceRequest& r) { return r.hash_ids; }),
      trace);
  const bool windowed = options.start_s > 0 || options.duration_s > 0;

  int64_t base = 0;           // the first arrival, as the file gives it
  int64_t window_offset = 0;  // the window's first arrival, relative to `base`
  if (has_arrivals) {
    stable_sort_unless_sorted(reqs, [](const TraceRequest& a, const TraceRequest& b) {
      return a.arrival_ns < b.arrival_ns;
    });
    if (!reqs.empty()) base = reqs.front().arrival_ns;
    rebase(reqs, path, trace.format);
  }
  if (windowed) {
    const int64_t start = detail::seconds_to_ns(options.start_s, "start");
    const int64_t duration = detail::seconds_to_ns(options.duration_s, "duration");
    const auto first =
        std::lower_bound(reqs.begin(), reqs.end(), start,
                         [](const TraceRequest& r, int64_t t) { return r.arrival_ns < t; });
    auto last = reqs.end();
    if (duration > 0) {
      last = std::lower_bound(first, reqs.end(), start + duration,
                              [](const TraceRequest& r, int64_t t) { return r.arrival_ns < t; });
    }
    reqs = std::vector<TraceRequest>(std::make_move_iterator(first), std::make_move_iterator(last));
    if (!reqs.empty()) window_offset = reqs.front().arrival_ns;
    rebase(reqs, path, trace.format);
  }
  if (trace.arrival_mode != ArrivalMode::TRACE) by_file_order(reqs);
  // The absolute time of t = 0: the first kept request's own arrival (base + the window offset
  // actually used), before any time scale.
  if (trace.format == TraceFormat::AZURE && trace.arrival_mode == ArrivalMode::TRACE &&
      !reqs.empty()) {
    trace.clock_start_unix_ns = base + window_offset;
  }
  if (options.max_requests > 0 && static_cast<int64_t>(reqs.size()) > options.max_requests) {
    reqs.resize(static_cast<size_t>(options.max_requests));
  }
  if (trace.arrival_mode == ArrivalMode::ALL_AT_ONCE) {
    for (auto& r : reqs) r.arrival_ns = 0;
  } else if (trace.arrival_mode == ArrivalMode::POISSON) {
    const auto arrivals = poisson_arrivals_ns(reqs.size(), options.rate, options.seed);
    for (size_t i = 0; i < reqs.size(); ++i) reqs[i].arrival_ns = arrivals[i];
  }
  for (auto& r : reqs) {
    r.arrival_ns = detail::scale_arrival(r.arrival_ns, options.time_scale, r.source_line);
  }
  trace.requests = std::move(reqs);
  return trace;
}

}  // namespace kvsim
