// The one strict text-to-number grammar, shared by trace readers, gen specs, sweep CSVs and CLI
// flags, so that "what counts as a number" does not differ between them.
#pragma once

#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace kvsim {

enum class ParseStatus { kOk, kNotNumber, kOutOfRange };

// A base-10 integer filling the whole text: one optional sign ('+', or '-' where T is signed),
// then one or more digits. No blanks, no "0x", no second sign, no fraction. kOutOfRange when the
// text is such an integer but does not fit in T; `out` is only written on kOk.
template <std::integral T>
ParseStatus parse_integer(std::string_view s, T& out) {
  const size_t first_digit = !s.empty() && (s.front() == '+' || s.front() == '-') ? 1 : 0;
  if (first_digit >= s.size() || s[first_digit] < '0' || s[first_digit] > '9') {
    return ParseStatus::kNotNumber;
  }
  if (s.front() == '+') s.remove_prefix(1);  // from_chars takes '-' only
  if (std::is_unsigned_v<T> && s.front() == '-') return ParseStatus::kNotNumber;
  T v{};
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ptr != s.data() + s.size()) return ParseStatus::kNotNumber;
  if (ec == std::errc::result_out_of_range) return ParseStatus::kOutOfRange;
  if (ec != std::errc{}) return ParseStatus::kNotNumber;
  out = v;
  return ParseStatus::kOk;
}

// parse_integer, with nullopt for both failures.
template <std::integral T>
std::optional<T> parse_integer(std::string_view s) {
  T v{};
  if (parse_integer(s, v) != ParseStatus::kOk) return std::nullopt;
  return v;
}

// A finite decimal number filling the whole text ([-]digits[.digits][e[+-]digits], also "1e3",
// ".5", "-0"; std::from_chars' general format). No blanks, no leading '+', no "inf"/"nan", no
// hex; nullopt otherwise, and when the value overflows double.
inline std::optional<double> parse_finite_double(std::string_view s) {
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || ptr != s.data() + s.size() || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

}  // namespace kvsim
