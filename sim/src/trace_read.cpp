// read_trace(): detect the layout, run its reader, then normalise arrivals (sort, rebase,
// window, limit, scale, synthetic modes) as docs/traces.md and replay-conventions.md §1-2 say.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include <fmt/core.h>

#include "kvsim/sim/trace.h"
#include "kvsim/sim/trace_parse.h"
#include "kvsim/sim/trace_random.h"
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

int64_t seconds_to_ns(double s, const char* what) {
  if (!std::isfinite(s) || s < 0 || s > 9.2e9) {
    throw std::invalid_argument(fmt::format("{} must be a finite number of seconds >= 0", what));
  }
  return std::llround(s * 1e9);
}

void validate(const TraceReadOptions& o) {
  if (o.hash_block_size < 0) throw std::invalid_argument("--hash-block-size must be >= 0");
  if (o.max_requests < 0) throw std::invalid_argument("--max-requests must be >= 0");
  if (!(o.time_scale > 0) || !std::isfinite(o.time_scale)) {
    throw std::invalid_argument(fmt::format("--time-scale must be > 0 (got {})", o.time_scale));
  }
  seconds_to_ns(o.start_s, "--start");
  seconds_to_ns(o.duration_s, "--duration");
  if (o.arrival == ArrivalMode::POISSON && (!(o.rate > 0) || !std::isfinite(o.rate))) {
    throw std::invalid_argument(
        fmt::format("--arrival poisson needs --rate > 0 requests per second (got {})", o.rate));
  }
}

void rebase(std::vector<TraceRequest>& reqs) {
  if (reqs.empty()) return;
  const int64_t base = reqs.front().arrival_ns;
  for (auto& r : reqs) r.arrival_ns -= base;
}

void by_file_order(std::vector<TraceRequest>& reqs) {
  std::stable_sort(reqs.begin(), reqs.end(), [](const TraceRequest& a, const TraceRequest& b) {
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
    : std::runtime_error(fmt::format("{}:{}: field '{}': {} (got '{}')", path, line, field, problem,
                                     detail::clip_for_message(value))),
      path_(std::move(path)),
      line_(line),
      field_(std::move(field)),
      problem_(std::move(problem)) {}

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

std::string clip_for_message(std::string_view value) {
  constexpr size_t kMax = 80;
  std::string out;
  for (const char c : value.substr(0, kMax)) out.push_back(c == '\n' || c == '\r' ? ' ' : c);
  if (value.size() > kMax) out += "...";
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

TraceFormat detect_trace_format(std::string_view first_line, const std::string& path) {
  const std::string_view line = trace_parse::trim(first_line);
  if (line.empty()) throw TraceError(path, 1, "header", "empty file, no header or records", "");
  if (line.front() == '{') return detail::detect_jsonl_format(line, path);
  const auto cols = detail::split_csv_header(line);
  if (has(cols, "TIMESTAMP") && has(cols, "ContextTokens")) return TraceFormat::AZURE;
  if (has(cols, "arrived_at")) return TraceFormat::VIDUR;
  if (has(cols, "Request tokens") && has(cols, "Response tokens")) return TraceFormat::BURSTGPT;
  if (has(cols, "num_prefill_tokens") && has(cols, "num_decode_tokens")) {
    return TraceFormat::SHAREGPT;
  }
  throw TraceError(path, 1, "header",
                   "unknown trace layout (expected an Azure, Vidur, BurstGPT or ShareGPT CSV "
                   "header or a JSON object; use --format)",
                   line);
}

Trace read_trace(const std::string& path, const TraceReadOptions& options) {
  validate(options);
  LineReader reader(path);
  Trace trace;
  trace.path = path;
  const std::string_view first = reader.first_nonblank_line();
  if (trace_parse::trim(first).empty()) {
    throw TraceError(path, 1, "header", "empty file, no header or records", "");
  }
  trace.format =
      options.format == TraceFormat::AUTO ? detect_trace_format(first, path) : options.format;

  detail::RowSink sink(trace, options);
  bool has_arrivals = true;
  switch (trace.format) {
    case TraceFormat::AZURE:
    case TraceFormat::VIDUR:
    case TraceFormat::BURSTGPT:
    case TraceFormat::SHAREGPT:
      has_arrivals = detail::read_csv_trace(reader, trace.format, sink);
      break;
    case TraceFormat::MOONCAKE:
    case TraceFormat::BAILIAN:
    case TraceFormat::KVSIM:
      detail::read_jsonl_trace(reader, trace.format, sink);
      break;
    case TraceFormat::AUTO:
      break;
  }
  if (trace.rows_read == 0) {
    throw TraceError(path, reader.line_number(), "records", "no records in the file", "");
  }

  std::vector<TraceRequest>& reqs = sink.requests;
  trace.arrival_mode = options.arrival;
  if (!has_arrivals && options.arrival == ArrivalMode::TRACE) {
    trace.arrival_mode = ArrivalMode::ALL_AT_ONCE;  // the layout has no timestamps
  }
  const bool windowed = options.start_s > 0 || options.duration_s > 0;
  if (windowed && !has_arrivals) {
    throw std::invalid_argument(
        fmt::format("--start/--duration need arrival times, and {} ({}) has none", path,
                    to_string(trace.format)));
  }

  if (has_arrivals) {
    std::stable_sort(reqs.begin(), reqs.end(), [](const TraceRequest& a, const TraceRequest& b) {
      return a.arrival_ns < b.arrival_ns;
    });
    rebase(reqs);
  }
  if (windowed) {
    const int64_t start = seconds_to_ns(options.start_s, "--start");
    const int64_t duration = seconds_to_ns(options.duration_s, "--duration");
    const auto first =
        std::lower_bound(reqs.begin(), reqs.end(), start,
                         [](const TraceRequest& r, int64_t t) { return r.arrival_ns < t; });
    auto last = reqs.end();
    if (duration > 0) {
      last = std::lower_bound(first, reqs.end(), start + duration,
                              [](const TraceRequest& r, int64_t t) { return r.arrival_ns < t; });
    }
    reqs = std::vector<TraceRequest>(std::make_move_iterator(first), std::make_move_iterator(last));
    rebase(reqs);
  }
  if (trace.arrival_mode != ArrivalMode::TRACE) by_file_order(reqs);
  if (options.max_requests > 0 && static_cast<int64_t>(reqs.size()) > options.max_requests) {
    reqs.resize(static_cast<size_t>(options.max_requests));
  }
  if (trace.arrival_mode == ArrivalMode::ALL_AT_ONCE) {
    for (auto& r : reqs) r.arrival_ns = 0;
  } else if (trace.arrival_mode == ArrivalMode::POISSON) {
    const auto arrivals = poisson_arrivals_ns(reqs.size(), options.rate, options.seed);
    for (size_t i = 0; i < reqs.size(); ++i) reqs[i].arrival_ns = arrivals[i];
  }
  if (options.time_scale != 1.0) {
    for (auto& r : reqs) {
      const double scaled = static_cast<double>(r.arrival_ns) * options.time_scale;
      if (scaled > 9.2e18) {
        throw std::invalid_argument(fmt::format(
            "--time-scale {} puts arrivals beyond 292 years of nanoseconds", options.time_scale));
      }
      r.arrival_ns = std::llround(scaled);
    }
  }
  trace.requests = std::move(reqs);
  return trace;
}

}  // namespace kvsim
