// Exact number and timestamp parsing used by the trace readers.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "kvsim/sim/io/parse_number.h"
#include "kvsim/sim/traces/trace_parse.h"

namespace kvsim::trace_parse {
namespace {

TEST(TraceParse, ParseIntWholeStringOnly) {
  EXPECT_EQ(parse_int("42"), 42);
  EXPECT_EQ(parse_int("-7"), -7);
  EXPECT_EQ(parse_int("+7"), 7);
  EXPECT_EQ(parse_int("9223372036854775807"), INT64_MAX);
  EXPECT_FALSE(parse_int("9223372036854775808"));
  EXPECT_FALSE(parse_int("12a"));
  EXPECT_FALSE(parse_int(""));
  EXPECT_FALSE(parse_int("1.0"));
  EXPECT_FALSE(parse_int(" 1"));
  EXPECT_FALSE(parse_int("+-7"));  // one sign at most
  EXPECT_FALSE(parse_int("-"));
  EXPECT_FALSE(parse_int("0x10"));
}

TEST(ParseNumber, IntegerStatusTellsSyntaxFromRange) {
  uint64_t u = 7;
  EXPECT_EQ(parse_integer(std::string_view("18446744073709551615"), u), ParseStatus::kOk);
  EXPECT_EQ(u, UINT64_MAX);
  EXPECT_EQ(parse_integer(std::string_view("18446744073709551616"), u), ParseStatus::kOutOfRange);
  EXPECT_EQ(u, UINT64_MAX);  // untouched on failure
  EXPECT_EQ(parse_integer(std::string_view("-1"), u), ParseStatus::kNotNumber);
  EXPECT_EQ(parse_integer(std::string_view("-0"), u), ParseStatus::kNotNumber);
  EXPECT_EQ(parse_integer(std::string_view("+5"), u), ParseStatus::kOk);
  EXPECT_EQ(u, 5u);
  int32_t i = 0;
  EXPECT_EQ(parse_integer(std::string_view("-2147483648"), i), ParseStatus::kOk);
  EXPECT_EQ(i, INT32_MIN);
  EXPECT_EQ(parse_integer(std::string_view("2147483648"), i), ParseStatus::kOutOfRange);
  EXPECT_EQ(parse_integer(std::string_view("99999999999999999999x"), i), ParseStatus::kNotNumber);
  EXPECT_EQ(parse_integer(std::string_view("1 "), i), ParseStatus::kNotNumber);
  EXPECT_EQ(parse_integer<int64_t>("-+1"), std::nullopt);
}

TEST(ParseNumber, FiniteDoubleWholeStringOnly) {
  EXPECT_EQ(parse_finite_double("0.25"), 0.25);
  EXPECT_EQ(parse_finite_double("-1e3"), -1000.0);
  EXPECT_EQ(parse_finite_double(".5"), 0.5);
  for (const char* bad : {"", "+1", "1.5x", " 1", "inf", "nan", "1e999", "0x1p3", "1,5"}) {
    EXPECT_EQ(parse_finite_double(bad), std::nullopt) << bad;
  }
}

TEST(TraceParse, DecimalSecondsAreExactNanoseconds) {
  EXPECT_EQ(parse_seconds_ns("0.0"), 0);
  EXPECT_EQ(parse_seconds_ns("4.314579"), 4'314'579'000);
  EXPECT_EQ(parse_seconds_ns("0.098189"), 98'189'000);
  EXPECT_EQ(parse_seconds_ns("3501.721937"), 3'501'721'937'000);
  EXPECT_EQ(parse_seconds_ns("19440110.0"), 19'440'110'000'000'000);
  EXPECT_EQ(parse_seconds_ns("5"), 5'000'000'000);
  EXPECT_EQ(parse_seconds_ns(".5"), 500'000'000);
  EXPECT_EQ(parse_seconds_ns("1."), 1'000'000'000);
  EXPECT_EQ(parse_seconds_ns("-2.5"), -2'500'000'000);
  // Exponents shift the decimal point on the digits, not through a double.
  EXPECT_EQ(parse_seconds_ns("1.5000000000000002e-07"), 150);
  EXPECT_EQ(parse_seconds_ns("1e-9"), 1);
  EXPECT_EQ(parse_seconds_ns("2.5E3"), 2'500'000'000'000);
  // Beyond nanoseconds: rounded to nearest, halves away from zero.
  EXPECT_EQ(parse_seconds_ns("0.0000000014"), 1);
  EXPECT_EQ(parse_seconds_ns("0.0000000015"), 2);
  EXPECT_EQ(parse_seconds_ns("0.00000000049"), 0);
  EXPECT_EQ(parse_seconds_ns("-0.0000000015"), -2);
  EXPECT_EQ(parse_decimal_scaled("3000", 6), 3'000'000'000);  // Mooncake ms -> ns
}

TEST(TraceParse, DecimalRejectsGarbageAndOverflow) {
  for (const char* bad :
       {"", "-", ".", "abc", "1.2.3", "1e", "1e+", "0x10", "1,5", "nan", "inf", "1 ", "e5"}) {
    EXPECT_FALSE(parse_seconds_ns(bad)) << bad;
  }
  EXPECT_FALSE(parse_seconds_ns("9223372037"));  // 9.2e18 ns overflows int64
  EXPECT_FALSE(parse_seconds_ns("1e300"));
  EXPECT_EQ(parse_seconds_ns("1e-300"), 0);
}

TEST(TraceParse, DaysFromCivil) {
  EXPECT_EQ(days_from_civil(1970, 1, 1), 0);
  EXPECT_EQ(days_from_civil(2000, 3, 1), 11017);
  EXPECT_EQ(days_from_civil(2023, 11, 16), 19677);
  EXPECT_EQ(days_from_civil(1969, 12, 31), -1);
  EXPECT_EQ(days_from_civil(2024, 3, 1) - days_from_civil(2024, 2, 28), 2);  // leap year
  EXPECT_EQ(days_from_civil(2100, 3, 1) - days_from_civil(2100, 2, 28), 1);  // not leap
}

TEST(TraceParse, AzureTimestampsKeepAllSevenDigits) {
  const auto a = parse_datetime_ns("2023-11-16 18:15:46.6805900");
  const auto b = parse_datetime_ns("2023-11-16 18:15:50.9951690");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, (19677LL * 86400 + 18 * 3600 + 15 * 60 + 46) * 1'000'000'000 + 680'590'000);
  EXPECT_EQ(*b - *a, 4'314'579'000);
  // Across midnight and a month end.
  EXPECT_EQ(*parse_datetime_ns("2024-03-01 00:00:00.0000001") -
                *parse_datetime_ns("2024-02-29 23:59:59.9999999"),
            200);
}

TEST(TraceParse, TimestampVariants) {
  const int64_t base = *parse_datetime_ns("2024-05-10 00:00:00");
  EXPECT_EQ(*parse_datetime_ns("2024-05-10T00:00:00Z"), base);
  EXPECT_EQ(*parse_datetime_ns("2024-05-10 00:00:00.009930+00:00"), base + 9'930'000);
  EXPECT_EQ(*parse_datetime_ns("2024-05-10 02:00:00+02:00"), base);
  EXPECT_EQ(*parse_datetime_ns("2024-05-09 19:30:00-0430"), base);
  EXPECT_EQ(*parse_datetime_ns("2024-05-10 00:00:00.1234567895"), base + 123'456'790);
  for (const char* bad :
       {"2023-11-16", "2023-13-01 00:00:00", "2023-02-29 00:00:00", "2023-11-16 24:00:00",
        "2023-11-16 18:60:00", "2023-11-16 18:15:46.", "2023-11-16 18:15:46.68x",
        "2023/11/16 18:15:46", "2023-11-16 18:15:46 +01:00", "not a time", "",
        "9999-12-31 23:59:59", "1000-01-01 00:00:00"}) {
    EXPECT_FALSE(parse_datetime_ns(bad)) << bad;
  }
}

// Fractions of every length from 1 to 12 digits: the first nine are the nanoseconds (padded
// with zeros on the right), the tenth rounds half up, later digits are ignored.
TEST(TraceParse, FractionDigitsOfEveryLength) {
  const int64_t base = *parse_datetime_ns("2024-05-10 00:00:00");
  for (const std::string digits :
       {"987654321987", "123456785000", "999999999500", "000000000900"}) {
    for (size_t len = 1; len <= digits.size(); ++len) {
      const std::string frac = digits.substr(0, len);
      std::string nine = frac.substr(0, std::min<size_t>(len, 9));
      nine.append(9 - nine.size(), '0');
      int64_t want = std::stoll(nine);
      if (len >= 10 && frac[9] >= '5') ++want;
      EXPECT_EQ(*parse_datetime_ns("2024-05-10 00:00:00." + frac), base + want) << frac;
    }
  }
}

}  // namespace
}  // namespace kvsim::trace_parse
