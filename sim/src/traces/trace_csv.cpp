// CSV layouts: Azure, Vidur, BurstGPT (6- and 8-column), ShareGPT length tables. Columns are
// found by name in the header, so extra or reordered columns are fine.
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "kvsim/sim/io/csv.h"
#include "kvsim/sim/traces/trace_parse.h"
#include "trace_readers.h"

namespace kvsim::detail {
namespace {

struct Columns {
  int arrival = -1;
  int input = -1;
  int output = -1;
  int session = -1;
  int total = -1;  // BurstGPT's "Total tokens", checked against request + response
  const char* arrival_name = nullptr;
  const char* input_name = nullptr;
  const char* output_name = nullptr;
};

int find_column(const std::vector<std::string>& header, std::string_view name) {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return static_cast<int>(i);
  }
  return -1;
}

bool blank(char ch) {
  return ch == ' ' || ch == '\t';
}

// A token count the general path accepts: an integer in [0, 2^31 - 1].
bool plain_token_count(std::string_view raw, int32_t& out) {
  const std::optional<int64_t> v = trace_parse::parse_int(raw);
  if (!v || *v < 0 || *v > std::numeric_limits<int32_t>::max()) return false;
  out = static_cast<int32_t>(*v);
  return true;
}

// Reads an Azure row as nearly all of them are, "TIMESTAMP,ContextTokens,GeneratedTokens" with no
// quote, no NUL, no blank around a value and no fourth field, without the splitter: false,
// having set nothing but `r` and the parser's date cache, for any other row or a value the
// general path would refuse, so that the general path then reads the row (or refuses it)
// exactly as before.
bool read_plain_azure_row(std::string_view line, trace_parse::DatetimeParser& datetimes,
                          TraceRequest& r) {
  const char* const p = line.data();
  const size_t n = line.size();
  if (std::memchr(p, '"', n) != nullptr || std::memchr(p, '\0', n) != nullptr) return false;
  const auto* c1 = static_cast<const char*>(std::memchr(p, ',', n));
  if (c1 == nullptr) return false;
  const auto* c2 =
      static_cast<const char*>(std::memchr(c1 + 1, ',', static_cast<size_t>(p + n - c1 - 1)));
  if (c2 == nullptr || std::memchr(c2 + 1, ',', static_cast<size_t>(p + n - c2 - 1)) != nullptr) {
    return false;
  }
  const std::string_view fields[3] = {
      std::string_view(p, static_cast<size_t>(c1 - p)),
      std::string_view(c1 + 1, static_cast<size_t>(c2 - c1 - 1)),
      std::string_view(c2 + 1, static_cast<size_t>(p + n - c2 - 1))};
  for (const std::string_view f : fields) {
    if (f.empty() || blank(f.front()) || blank(f.back())) return false;
  }
  if (!plain_token_count(fields[1], r.input_tokens) ||
      !plain_token_count(fields[2], r.output_tokens)) {
    return false;
  }
  const std::optional<int64_t> t = datetimes.parse(fields[0]);
  if (!t) return false;
  r.arrival_ns = *t;
  return true;
}

}  // namespace

std::vector<std::string> split_csv_header(std::string_view line, const std::string& path,
                                          int64_t line_number) {
  csv::Splitter splitter;
  if (const std::string err = splitter.split(line); !err.empty()) {
    throw TraceError(path, line_number, "header", err, line);
  }
  std::vector<std::string> out;
  for (const auto f : splitter.fields()) out.emplace_back(trace_parse::trim(f));
  return out;
}

bool read_csv_trace(LineReader& reader, TraceFormat format, RowSink& sink) {
  const std::string& path = reader.path();
  std::string_view line;
  // The header is the first non-blank line.
  while (reader.next(line) && trace_parse::trim(line).empty()) {
  }
  const int64_t header_line = reader.line_number();
  const std::vector<std::string> header = split_csv_header(line, path, header_line);
  // A repeated name would make "the" column ambiguous (and one of them silently ignored).
  for (size_t i = 0; i < header.size(); ++i) {
    if (!header[i].empty() && find_column(header, header[i]) != static_cast<int>(i)) {
      throw TraceError(path, header_line, header[i], "column name given twice in the header", line);
    }
  }

  Columns c;
  switch (format) {
    case TraceFormat::AZURE:
      c.arrival_name = "TIMESTAMP", c.input_name = "ContextTokens",
      c.output_name = "GeneratedTokens";
      break;
    case TraceFormat::VIDUR:
      c.arrival_name = "arrived_at", c.input_name = "num_prefill_tokens",
      c.output_name = "num_decode_tokens";
      break;
    case TraceFormat::BURSTGPT:
      c.arrival_name = "Timestamp", c.input_name = "Request tokens",
      c.output_name = "Response tokens";
      c.session = find_column(header, "Session ID");
      c.total = find_column(header, "Total tokens");
      break;
    case TraceFormat::SHAREGPT:
      c.input_name = "num_prefill_tokens", c.output_name = "num_decode_tokens";
      break;
    default:
      throw std::logic_error("read_csv_trace: not a CSV format");
  }
  for (const char* name : {c.arrival_name, c.input_name, c.output_name}) {
    if (name != nullptr && find_column(header, name) < 0) {
      throw TraceError(path, header_line, name,
                       fmt::format("missing column in the {} header", to_string(format)), line);
    }
  }
  if (c.arrival_name) c.arrival = find_column(header, c.arrival_name);
  c.input = find_column(header, c.input_name);
  c.output = find_column(header, c.output_name);

  csv::Splitter splitter;
  const std::vector<std::string_view>& fields = splitter.fields();
  trace_parse::DatetimeParser datetimes;
  const auto parse_tokens = [&](int col, const char* name) -> int32_t {
    const std::string_view raw = trace_parse::trim(fields[static_cast<size_t>(col)]);
    const auto v = trace_parse::parse_int(raw);
    if (!v) {
      throw TraceError(path, reader.line_number(), name, "not an integer token count", raw);
    }
    if (*v < 0) throw TraceError(path, reader.line_number(), name, "negative token count", raw);
    if (*v > std::numeric_limits<int32_t>::max()) {
      throw TraceError(path, reader.line_number(), name, "token count out of range", raw);
    }
    return static_cast<int32_t>(*v);
  };

  // Azure's own layout: its rows take read_plain_azure_row first.
  const bool azure_layout = format == TraceFormat::AZURE && header.size() == 3 && c.arrival == 0 &&
                            c.input == 1 && c.output == 2;
  while (reader.next(line)) {
    if (trace_parse::trim(line).empty()) continue;
    sink.count_row();
    try {
      if (azure_layout) {
        TraceRequest r;
        if (read_plain_azure_row(line, datetimes, r)) {
          r.source_line = reader.line_number();
          sink.add(std::move(r));
          continue;
        }
      }
      if (const std::string err = splitter.split(line); !err.empty()) {
        throw TraceError(path, reader.line_number(), "row", err, line);
      }
      if (fields.size() < header.size()) {
        throw TraceError(path, reader.line_number(), header[fields.size()],
                         fmt::format("missing value: {} fields, the header has {}", fields.size(),
                                     header.size()),
                         line);
      }
      if (fields.size() > header.size()) {
        throw TraceError(path, reader.line_number(), "row",
                         fmt::format("{} fields, the header has {}", fields.size(), header.size()),
                         line);
      }
      TraceRequest r;
      r.source_line = reader.line_number();
      r.input_tokens = parse_tokens(c.input, c.input_name);
      r.output_tokens = parse_tokens(c.output, c.output_name);
      if (c.arrival >= 0) {
        const std::string_view raw = trace_parse::trim(fields[static_cast<size_t>(c.arrival)]);
        const auto t = format == TraceFormat::AZURE ? datetimes.parse(raw)
                                                    : trace_parse::parse_seconds_ns(raw);
        if (!t) {
          throw TraceError(path, reader.line_number(), c.arrival_name,
                           format == TraceFormat::AZURE
                               ? "not a timestamp YYYY-MM-DD HH:MM:SS[.fffffff]"
                               : "not a number of seconds",
                           raw);
        }
        r.arrival_ns = *t;
      }
      if (c.total >= 0) {
        // A row whose total disagrees with its parts has at least one wrong count, and nothing
        // says which: refuse it rather than replay a guess.
        const std::string_view raw = trace_parse::trim(fields[static_cast<size_t>(c.total)]);
        const auto total = trace_parse::parse_int(raw);
        if (!total) {
          throw TraceError(path, reader.line_number(), "Total tokens", "not an integer token count",
                           raw);
        }
        const int64_t sum = int64_t{r.input_tokens} + r.output_tokens;
        if (*total != sum) {
          throw TraceError(
              path, reader.line_number(), "Total tokens",
              fmt::format("differs from Request tokens + Response tokens ({} + {} = {})",
                          r.input_tokens, r.output_tokens, sum),
              raw);
        }
      }
      if (c.session >= 0) {
        r.session_id = std::string(trace_parse::trim(fields[static_cast<size_t>(c.session)]));
      }
      // A NUL byte in any column, one kvsim does not read included, is refused (docs/files.md);
      // after the read columns, so theirs keep their own message. Fields hold only the line's
      // bytes: one look at the line clears them all.
      if (line.find('\0') != std::string_view::npos) {
        for (size_t k = 0; k < fields.size(); ++k) {
          if (fields[k].find('\0') != std::string_view::npos) {
            throw TraceError(path, reader.line_number(), header[k], "NUL byte", fields[k]);
          }
        }
      }
      // BurstGPT logs failed requests with zero response tokens: not requests that ran.
      if (format == TraceFormat::BURSTGPT && r.output_tokens == 0) {
        sink.drop("failed request (zero response tokens)");
        continue;
      }
      sink.add(std::move(r));
    } catch (const TraceError& e) {
      sink.bad_row(e);
    }
  }
  return c.arrival >= 0;
}

}  // namespace kvsim::detail
