// The trace readers' fast paths (issue 27) against the straightforward code they replaced, kept
// here as the reference: parse_datetime_ns and DatetimeParser (its cached date), trace_parse's
// parse_int, and csv::Splitter's quote-free path must accept, reject and return exactly what
// the reference does, on valid inputs and on many random mutations of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "kvsim/sim/io/csv.h"
#include "kvsim/sim/io/parse_number.h"
#include "kvsim/sim/traces/trace_parse.h"

namespace kvsim {
namespace {

// ---- The reference: the readers' code before the fast paths. ----

bool ref_is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::optional<int64_t> ref_fixed_digits(std::string_view s, size_t& pos, size_t width) {
  if (pos + width > s.size()) return std::nullopt;
  int64_t v = 0;
  for (size_t k = 0; k < width; ++k) {
    const char c = s[pos + k];
    if (!ref_is_digit(c)) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  pos += width;
  return v;
}

bool ref_expect(std::string_view s, size_t& pos, char c) {
  if (pos >= s.size() || s[pos] != c) return false;
  ++pos;
  return true;
}

int64_t ref_days_in_month(int64_t y, int64_t m) {
  static constexpr int64_t kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

std::optional<int64_t> ref_parse_datetime_ns(std::string_view s) {
  constexpr int64_t kNsPerSec = 1'000'000'000;
  size_t pos = 0;
  const auto year = ref_fixed_digits(s, pos, 4);
  if (!year || !ref_expect(s, pos, '-')) return std::nullopt;
  const auto month = ref_fixed_digits(s, pos, 2);
  if (!month || !ref_expect(s, pos, '-')) return std::nullopt;
  const auto day = ref_fixed_digits(s, pos, 2);
  if (!day || pos >= s.size() || (s[pos] != ' ' && s[pos] != 'T')) return std::nullopt;
  ++pos;
  const auto hour = ref_fixed_digits(s, pos, 2);
  if (!hour || !ref_expect(s, pos, ':')) return std::nullopt;
  const auto minute = ref_fixed_digits(s, pos, 2);
  if (!minute || !ref_expect(s, pos, ':')) return std::nullopt;
  const auto second = ref_fixed_digits(s, pos, 2);
  if (!second) return std::nullopt;
  if (*month < 1 || *month > 12 || *day < 1 || *day > ref_days_in_month(*year, *month) ||
      *hour > 23 || *minute > 59 || *second > 59) {
    return std::nullopt;
  }
  int64_t frac_ns = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    const size_t begin = pos;
    static constexpr int64_t kScale[10] = {
        1'000'000'000, 100'000'000, 10'000'000, 1'000'000, 100'000, 10'000, 1'000, 100, 10, 1};
    bool round_up = false;
    for (; pos < s.size() && ref_is_digit(s[pos]); ++pos) {
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
      const auto oh = ref_fixed_digits(s, pos, 2);
      if (!oh) return std::nullopt;
      if (pos < s.size() && s[pos] == ':') ++pos;
      const auto om = ref_fixed_digits(s, pos, 2);
      if (!om || *oh > 23 || *om > 59) return std::nullopt;
      offset_s = sign * (*oh * 3600 + *om * 60);
    }
  }
  if (pos != s.size()) return std::nullopt;
  const int64_t days = trace_parse::days_from_civil(*year, *month, *day);
  const int64_t secs = days * 86400 + *hour * 3600 + *minute * 60 + *second - offset_s;
  int64_t ns = 0;
  if (__builtin_mul_overflow(secs, kNsPerSec, &ns) || __builtin_add_overflow(ns, frac_ns, &ns)) {
    return std::nullopt;
  }
  return ns;
}

// The splitter's character loop, for every line (fields as strings, or "ERROR: ...").
std::vector<std::string> ref_split(std::string_view line) {
  std::vector<std::string> fields;
  const auto error = [&](const char* problem) {
    return std::vector<std::string>{
        fmt::format("ERROR: column {}: {}", fields.size() + 1, problem)};
  };
  size_t i = 0;
  while (true) {
    if (i < line.size() && line[i] == '"') {
      std::string field;
      ++i;
      while (true) {
        if (i >= line.size()) return error("unterminated quote");
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field.push_back(line[i++]);
      }
      if (i < line.size() && line[i] != ',') return error("text after a closing quote");
      fields.push_back(field);
    } else {
      size_t end = i;
      while (end < line.size() && line[end] != ',' && line[end] != '"') ++end;
      if (end < line.size() && line[end] == '"') return error("stray quote in an unquoted field");
      fields.emplace_back(line.substr(i, end - i));
      i = end;
    }
    if (i >= line.size()) return fields;
    ++i;
  }
}

std::vector<std::string> split(csv::Splitter& s, std::string_view line) {
  if (const std::string err = s.split(line); !err.empty()) return {"ERROR: " + err};
  return {s.fields().begin(), s.fields().end()};
}

std::string printable(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(c);
    } else {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

// Mutates `s`: replaces, inserts or deletes a character from `alphabet`, or cuts the tail.
void mutate(std::string& s, std::string_view alphabet, std::mt19937_64& rng) {
  const auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  const char c = alphabet[pick(alphabet.size())];
  switch (pick(4)) {
    case 0:
      if (!s.empty()) s[pick(s.size())] = c;
      break;
    case 1:
      s.insert(s.begin() + static_cast<std::ptrdiff_t>(pick(s.size() + 1)), c);
      break;
    case 2:
      if (!s.empty()) s.erase(s.begin() + static_cast<std::ptrdiff_t>(pick(s.size())));
      break;
    default:
      s.resize(pick(s.size() + 1));
      break;
  }
}

// A well-formed timestamp, sometimes out of range (month 13, Feb 29 of a common year, hour 24,
// years outside int64 nanoseconds), with a fraction and offset of random shape.
std::string random_timestamp(std::mt19937_64& rng) {
  const auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::string s = fmt::format(
      "{:04d}-{:02d}-{:02d}{}{:02d}:{:02d}:{:02d}", uni(0, 9) == 0 ? uni(0, 9999) : uni(1677, 2263),
      uni(0, 13), uni(0, 32), uni(0, 3) == 0 ? 'T' : ' ', uni(0, 24), uni(0, 60), uni(0, 60));
  if (uni(0, 3) != 0) {
    s += '.';
    const int digits = uni(0, 13);
    for (int k = 0; k < digits; ++k) s += static_cast<char>('0' + uni(0, 9));
  }
  switch (uni(0, 5)) {
    case 0:
      s += 'Z';
      break;
    case 1:
      s += fmt::format("{}{:02d}:{:02d}", uni(0, 1) ? '+' : '-', uni(0, 24), uni(0, 60));
      break;
    case 2:
      s += fmt::format("{}{:02d}{:02d}", uni(0, 1) ? '+' : '-', uni(0, 24), uni(0, 60));
      break;
    default:
      break;
  }
  return s;
}

TEST(TraceParseEquivalence, DatetimesMatchTheReference) {
  std::mt19937_64 rng(27);
  constexpr std::string_view kAlphabet("0123456789-: T.Z+x\0\t9", 21);
  // One parser across all inputs (its cached date is exercised by runs on the same date), and
  // the free function.
  trace_parse::DatetimeParser parser;
  std::string last_valid = "2023-11-16 18:15:46.6805900";
  int accepted = 0;
  int cached = 0;
  for (int i = 0; i < 200'000; ++i) {
    std::string s;
    switch (i % 4) {
      case 0:
        s = random_timestamp(rng);
        break;
      case 1:  // the same date as a recent valid one, with a mutation anywhere
        s = last_valid;
        mutate(s, kAlphabet, rng);
        break;
      case 2:  // the same date, another time of day
        s = last_valid.substr(0, 11) + random_timestamp(rng).substr(11);
        break;
      default:
        s = random_timestamp(rng);
        for (int k = std::uniform_int_distribution<int>(1, 3)(rng); k > 0; --k) {
          mutate(s, kAlphabet, rng);
        }
        break;
    }
    const std::optional<int64_t> want = ref_parse_datetime_ns(s);
    ASSERT_EQ(trace_parse::parse_datetime_ns(s), want) << printable(s);
    ASSERT_EQ(parser.parse(s), want) << printable(s);
    if (want) {
      ++accepted;
      cached += s.compare(0, 10, last_valid, 0, 10) == 0;
      last_valid = s;
    }
  }
  // Both sides of every branch are exercised.
  EXPECT_GT(accepted, 40'000);
  EXPECT_GT(cached, 10'000);
}

TEST(TraceParseEquivalence, ADateSeenBeforeIsStillCheckedAfterAFailure) {
  trace_parse::DatetimeParser parser;
  EXPECT_TRUE(parser.parse("2023-02-28 10:00:00"));
  EXPECT_FALSE(parser.parse("2023-02-29 10:00:00"));
  EXPECT_FALSE(parser.parse("2023-02-28 10:00:0"));
  EXPECT_FALSE(parser.parse("2023-02-28 24:00:00"));
  EXPECT_EQ(parser.parse("2023-02-28 10:00:01"), ref_parse_datetime_ns("2023-02-28 10:00:01"));
  // The initial (1970-01-01) cache is a valid date: no input is taken for it unchecked.
  trace_parse::DatetimeParser fresh;
  EXPECT_EQ(fresh.parse("1970-01-01 00:00:00"), 0);
  EXPECT_FALSE(trace_parse::DatetimeParser().parse("1970-01-01x00:00:00"));
  EXPECT_FALSE(trace_parse::DatetimeParser().parse(std::string_view("1970-01-01 00:00:0\0", 19)));
}

TEST(TraceParseEquivalence, IntegersMatchTheSharedGrammar) {
  std::mt19937_64 rng(2027);
  constexpr std::string_view kAlphabet("0123456789+- x.\0", 16);
  const auto check = [](const std::string& s) {
    ASSERT_EQ(trace_parse::parse_int(s), parse_integer<int64_t>(s)) << printable(s);
  };
  for (const char* s : {"0", "00", "007", "999999999999999999", "9999999999999999999",
                        "9223372036854775807", "9223372036854775808", "-9223372036854775808",
                        "000000000000000000001", "+0", "-0", "", "+", "-", "1 "}) {
    check(s);
  }
  for (int i = 0; i < 100'000; ++i) {
    const int len = std::uniform_int_distribution<int>(0, 22)(rng);
    std::string s;
    const bool digits_only = i % 2 == 0;
    for (int k = 0; k < len; ++k) {
      s += digits_only ? static_cast<char>('0' + rng() % 10) : kAlphabet[rng() % kAlphabet.size()];
    }
    check(s);
  }
}

TEST(TraceParseEquivalence, CsvSplitMatchesTheReference) {
  std::mt19937_64 rng(4180);
  constexpr std::string_view kAlphabet("a,\" \0,b", 7);
  csv::Splitter splitter;  // reused, as the readers do
  for (int i = 0; i < 200'000; ++i) {
    const int len = std::uniform_int_distribution<int>(0, 30)(rng);
    std::string line;
    // Half the lines without quotes (the fast path), half with.
    const size_t alphabet = i % 2 == 0 ? 2 : kAlphabet.size();
    for (int k = 0; k < len; ++k) {
      char c = kAlphabet[rng() % alphabet];
      if (i % 2 == 0 && c == 'a' && rng() % 3 == 0) c = "\0 b"[rng() % 3];
      line += c;
    }
    ASSERT_EQ(split(splitter, line), ref_split(line)) << printable(line);
  }
  // The fields of an Azure row, and empty fields at both ends.
  EXPECT_EQ(split(splitter, "2023-11-16 18:15:46.6805900,374,44"),
            (std::vector<std::string>{"2023-11-16 18:15:46.6805900", "374", "44"}));
  EXPECT_EQ(split(splitter, ",,"), (std::vector<std::string>{"", "", ""}));
}

}  // namespace
}  // namespace kvsim
