// Exact text-to-number conversions used by the trace readers. Nothing here goes through a float:
// decimal strings are scaled by powers of ten on their digits, so "4.314579" seconds is exactly
// 4314579000 ns and Azure's 7-digit fractions survive intact.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kvsim::trace_parse {

// Strips ASCII spaces and tabs at both ends. Inline: called for every field of every row.
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A base-10 integer (optional leading '-' or '+') filling the whole string; nullopt otherwise,
// and on int64 overflow. The grammar is kvsim::parse_integer's (parse_number.h).
std::optional<int64_t> parse_int(std::string_view s);

// value(s) * 10^scale, rounded to the nearest integer (halves away from zero), where s is a
// decimal number: [+-]digits[.digits][(e|E)[+-]digits] (at least one digit). nullopt when s is
// not such a number or the result does not fit in int64.
std::optional<int64_t> parse_decimal_scaled(std::string_view s, int scale);

// Decimal seconds to integer nanoseconds, exactly (parse_decimal_scaled(s, 9)).
inline std::optional<int64_t> parse_seconds_ns(std::string_view s) {
  return parse_decimal_scaled(s, 9);
}

// Days from 1970-01-01 to the proleptic Gregorian date y-m-d (H. Hinnant's days_from_civil).
constexpr int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;                                    // [0, 399]
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;  // [0, 365]
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;            // [0, 146096]
  return era * 146097 + doe - 719468;
}

// "YYYY-MM-DD HH:MM:SS[.fraction][Z|+HH:MM|-HH:MM|+HHMM]" ('T' may replace the space) to
// nanoseconds since 1970-01-01T00:00:00 UTC. A naive timestamp (no offset) is taken as UTC. The
// fraction may have any number of digits; beyond 9 it is rounded to the nearest nanosecond.
// nullopt when the text is not such a timestamp, names an impossible date or time, or lies
// outside what int64 nanoseconds can hold (years 1678..2261).
std::optional<int64_t> parse_datetime_ns(std::string_view s);

// parse_datetime_ns over many timestamps (a trace's rows): the same result for every text, and
// cheaper for a run of timestamps on the same date, whose day number it remembers.
class DatetimeParser {
 public:
  std::optional<int64_t> parse(std::string_view s);

 private:
  // The last date accepted and its day number; starts as a valid date (day 0).
  char last_date_[10] = {'1', '9', '7', '0', '-', '0', '1', '-', '0', '1'};
  int64_t last_days_ = 0;
};

}  // namespace kvsim::trace_parse
