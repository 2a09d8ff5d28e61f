#include "kvsim/sim/traces/trace_parse.h"

#include <algorithm>
#include <limits>
#include <string>

#include "kvsim/sim/io/parse_number.h"

namespace kvsim::trace_parse {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<int64_t> parse_int(std::string_view s) {
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

// Reads exactly `width` digits at s[pos...]; advances pos.
std::optional<int64_t> fixed_digits(std::string_view s, size_t& pos, size_t width) {
  if (pos + width > s.size()) return std::nullopt;
  int64_t v = 0;
  for (size_t k = 0; k < width; ++k) {
    const char c = s[pos + k];
    if (!is_digit(c)) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  pos += width;
  return v;
}

bool expect(std::string_view s, size_t& pos, char c) {
  if (pos >= s.size() || s[pos] != c) return false;
  ++pos;
  return true;
}

bool is_leap(int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int64_t days_in_month(int64_t y, int64_t m) {
  static constexpr int64_t kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : kDays[m - 1];
}

}  // namespace

std::optional<int64_t> parse_datetime_ns(std::string_view s) {
  constexpr int64_t kNsPerSec = 1'000'000'000;
  size_t pos = 0;
  const auto year = fixed_digits(s, pos, 4);
  if (!year || !expect(s, pos, '-')) return std::nullopt;
  const auto month = fixed_digits(s, pos, 2);
  if (!month || !expect(s, pos, '-')) return std::nullopt;
  const auto day = fixed_digits(s, pos, 2);
  if (!day || pos >= s.size() || (s[pos] != ' ' && s[pos] != 'T')) return std::nullopt;
  ++pos;
  const auto hour = fixed_digits(s, pos, 2);
  if (!hour || !expect(s, pos, ':')) return std::nullopt;
  const auto minute = fixed_digits(s, pos, 2);
  if (!minute || !expect(s, pos, ':')) return std::nullopt;
  const auto second = fixed_digits(s, pos, 2);
  if (!second) return std::nullopt;
  if (*month < 1 || *month > 12 || *day < 1 || *day > days_in_month(*year, *month) || *hour > 23 ||
      *minute > 59 || *second > 59) {
    return std::nullopt;
  }
  int64_t frac_ns = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    const size_t begin = pos;
    // The first nine digits are the nanoseconds (scaled by a table, not divided per digit: the
    // division showed in the replay's profile); the tenth rounds.
    static constexpr int64_t kScale[10] = {
        1'000'000'000, 100'000'000, 10'000'000, 1'000'000, 100'000, 10'000, 1'000, 100, 10, 1};
    bool round_up = false;
    for (; pos < s.size() && is_digit(s[pos]); ++pos) {
      const size_t k = pos - begin;
      if (k < 9) {
        frac_ns = frac_ns * 10 + (s[pos] - '0');
      } else if (k == 9) {
        round_up = s[pos] >= '5';
      }
    }
    if (pos == begin) return std::nullopt;
    frac_ns *= kScale[std::min<size_t>(pos - begin, 9)];
    if (round_up) ++frac_ns;
  }
  int64_t offset_s = 0;
  if (pos < s.size()) {
    if (s[pos] == 'Z' && pos + 1 == s.size()) {
      ++pos;
    } else if (s[pos] == '+' || s[pos] == '-') {
      const int64_t sign = s[pos] == '-' ? -1 : 1;
      ++pos;
      const auto oh = fixed_digits(s, pos, 2);
      if (!oh) return std::nullopt;
      if (pos < s.size() && s[pos] == ':') ++pos;
      const auto om = fixed_digits(s, pos, 2);
      if (!om || *oh > 23 || *om > 59) return std::nullopt;
      offset_s = sign * (*oh * 3600 + *om * 60);
    }
  }
  if (pos != s.size()) return std::nullopt;
  const int64_t days = days_from_civil(*year, *month, *day);
  const int64_t secs = days * 86400 + *hour * 3600 + *minute * 60 + *second - offset_s;
  // int64 nanoseconds span 1677-09-21 .. 2262-04-11; other years cannot be represented.
  int64_t ns = 0;
  if (__builtin_mul_overflow(secs, kNsPerSec, &ns) || __builtin_add_overflow(ns, frac_ns, &ns)) {
    return std::nullopt;
  }
  return ns;
}

}  // namespace kvsim::trace_parse
