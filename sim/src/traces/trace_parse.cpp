#include "kvsim/sim/traces/trace_parse.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "kvsim/sim/io/parse_number.h"

namespace kvsim::trace_parse {

std::optional<int64_t> parse_int(std::string_view s) {
  // Up to 18 plain digits always fit int64: read them in place (most token counts), the rest
  // through the shared grammar, which gives the same value for these.
  if (!s.empty() && s.size() <= 18) {
    int64_t v = 0;
    size_t i = 0;
    for (; i < s.size(); ++i) {
      const unsigned d = static_cast<unsigned>(static_cast<unsigned char>(s[i])) - '0';
      if (d > 9) break;
      v = v * 10 + d;
    }
    if (i == s.size()) return v;
  }
  return parse_integer<int64_t>(s);
}

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Multiplies by ten and adds a digit; false on int64 overflow.
bool push_digit(int64_t& v, int digit) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (v > (kMax - digit) / 10) return false;
  v = v * 10 + digit;
  return true;
}

}  // namespace

std::optional<int64_t> parse_decimal_scaled(std::string_view s, int scale) {
  bool negative = false;
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  // Mantissa digits (leading zeros dropped) and the decimal exponent of the last digit.
  std::string digits;
  int64_t exponent = 0;
  size_t i = 0;
  size_t n_digits = 0;
  for (; i < s.size() && is_digit(s[i]); ++i, ++n_digits) {
    if (!digits.empty() || s[i] != '0') digits.push_back(s[i]);
  }
  if (i < s.size() && s[i] == '.') {
    for (++i; i < s.size() && is_digit(s[i]); ++i, ++n_digits) {
      if (!digits.empty() || s[i] != '0') digits.push_back(s[i]);
      --exponent;
    }
  }
  if (n_digits == 0) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    const auto e = parse_int(s.substr(i + 1));
    if (!e || *e > 10000 || *e < -10000) return std::nullopt;
    exponent += *e;
    i = s.size();
  }
  if (i != s.size()) return std::nullopt;
  if (digits.empty()) return 0;

  // value = digits * 10^(exponent + scale). Keep the digits that stay left of the decimal point
  // and round on the first one dropped.
  const int64_t shift = exponent + scale;
  const int64_t kept = static_cast<int64_t>(digits.size()) + (shift < 0 ? shift : 0);
  int64_t v = 0;
  for (int64_t k = 0; k < kept; ++k) {
    if (!push_digit(v, digits[static_cast<size_t>(k)] - '0')) return std::nullopt;
  }
  for (int64_t k = 0; k < shift; ++k) {
    if (!push_digit(v, 0)) return std::nullopt;
  }
  if (kept >= 0 && kept < static_cast<int64_t>(digits.size()) &&
      digits[static_cast<size_t>(kept)] >= '5') {
    if (v == std::numeric_limits<int64_t>::max()) return std::nullopt;
    ++v;
  }
  return negative ? -v : v;
}

namespace {

// Two ASCII digits at p as a number, or -1 when either is not a digit.
int two_digits(const char* p) {
  const unsigned a = static_cast<unsigned>(static_cast<unsigned char>(p[0])) - '0';
  const unsigned b = static_cast<unsigned>(static_cast<unsigned char>(p[1])) - '0';
  if (a > 9 || b > 9) return -1;
  return static_cast<int>(a * 10 + b);
}

bool is_leap(int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int64_t days_in_month(int64_t y, int64_t m) {
  static constexpr int64_t kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : kDays[m - 1];
}

}  // namespace

std::optional<int64_t> DatetimeParser::parse(std::string_view s) {
  constexpr int64_t kNsPerSec = 1'000'000'000;
  // "YYYY-MM-DD HH:MM:SS" sits at fixed positions: checked in place rather than field by field
  // (the per-field helpers showed in the replay's profile).
  constexpr size_t kDateLen = sizeof(last_date_);
  const char* p = s.data();
  const size_t n = s.size();
  if (n < 19 || (p[10] != ' ' && p[10] != 'T') || p[13] != ':' || p[16] != ':') {
    return std::nullopt;
  }
  const int hour = two_digits(p + 11);
  const int minute = two_digits(p + 14);
  const int second = two_digits(p + 17);
  if (hour < 0 || minute < 0 || second < 0 || hour > 23 || minute > 59 || second > 59) {
    return std::nullopt;
  }
  // Consecutive rows of a trace nearly always share their date: the same text has the same
  // (already validated) day number.
  int64_t days = last_days_;
  if (std::memcmp(p, last_date_, kDateLen) != 0) {
    if (p[4] != '-' || p[7] != '-') return std::nullopt;
    const int century = two_digits(p);
    const int year_in_century = two_digits(p + 2);
    const int month = two_digits(p + 5);
    const int day = two_digits(p + 8);
    if (century < 0 || year_in_century < 0 || month < 0 || day < 0) return std::nullopt;
    const int64_t year = int64_t{century} * 100 + year_in_century;
    if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month)) {
      return std::nullopt;
    }
    days = days_from_civil(year, month, day);
    std::memcpy(last_date_, p, kDateLen);
    last_days_ = days;
  }
  size_t pos = 19;
  int64_t frac_ns = 0;
  if (pos < n && p[pos] == '.') {
    ++pos;
    const size_t begin = pos;
    // The first nine digits are the nanoseconds (scaled by a table, not divided per digit: the
    // division showed in the replay's profile); the tenth rounds, later ones are ignored.
    static constexpr int64_t kScale[10] = {
        1'000'000'000, 100'000'000, 10'000'000, 1'000'000, 100'000, 10'000, 1'000, 100, 10, 1};
    const size_t nine = std::min(n, begin + 9);
    for (; pos < nine && is_digit(p[pos]); ++pos) frac_ns = frac_ns * 10 + (p[pos] - '0');
    if (pos == begin) return std::nullopt;
    frac_ns *= kScale[pos - begin];
    if (pos - begin == 9 && pos < n && is_digit(p[pos])) {
      const bool round_up = p[pos] >= '5';
      for (++pos; pos < n && is_digit(p[pos]); ++pos) {
      }
      if (round_up) ++frac_ns;
    }
  }
  int64_t offset_s = 0;
  if (pos < n) {
    if (p[pos] == 'Z' && pos + 1 == n) {
      ++pos;
    } else if (p[pos] == '+' || p[pos] == '-') {
      const int64_t sign = p[pos] == '-' ? -1 : 1;
      ++pos;
      const int oh = pos + 2 <= n ? two_digits(p + pos) : -1;
      if (oh < 0) return std::nullopt;
      pos += 2;
      if (pos < n && p[pos] == ':') ++pos;
      const int om = pos + 2 <= n ? two_digits(p + pos) : -1;
      if (om < 0 || oh > 23 || om > 59) return std::nullopt;
      pos += 2;
      offset_s = sign * (oh * 3600 + om * 60);
    }
  }
  if (pos != n) return std::nullopt;
  const int64_t secs = days * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  // int64 nanoseconds span 1677-09-21 .. 2262-04-11; other years cannot be represented.
  int64_t ns = 0;
  if (__builtin_mul_overflow(secs, kNsPerSec, &ns) || __builtin_add_overflow(ns, frac_ns, &ns)) {
    return std::nullopt;
  }
  return ns;
}

std::optional<int64_t> parse_datetime_ns(std::string_view s) {
  return DatetimeParser().parse(s);
}

}  // namespace kvsim::trace_parse
