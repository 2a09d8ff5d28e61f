// The shared CSV splitter (kvsim/sim/csv.h) and how the trace readers report its errors: quoted
// fields, escaped quotes, stray and unterminated quotes, in the header and in rows.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "kvsim/sim/io/csv.h"
#include "kvsim/sim/traces/trace.h"

namespace kvsim {
namespace {

// The fields of `line` as strings, or {"ERROR: <message>"}.
std::vector<std::string> split_fields(std::string_view line) {
  csv::Splitter s;
  if (const std::string err = s.split(line); !err.empty()) return {fmt::format("ERROR: {}", err)};
  return {s.fields().begin(), s.fields().end()};
}

using V = std::vector<std::string>;

TEST(CsvSplit, PlainFieldsAndEmptyOnes) {
  EXPECT_EQ(split_fields("a,b,c"), (V{"a", "b", "c"}));
  EXPECT_EQ(split_fields(""), (V{""}));
  EXPECT_EQ(split_fields(",x,"), (V{"", "x", ""}));
  EXPECT_EQ(split_fields(" a , b "), (V{" a ", " b "}));  // not trimmed
}

TEST(CsvSplit, QuotedFieldsKeepCommasAndEscapedQuotes) {
  EXPECT_EQ(split_fields(R"("a,b",c)"), (V{"a,b", "c"}));
  EXPECT_EQ(split_fields(R"(x,"say ""hi""",y)"), (V{"x", R"(say "hi")", "y"}));
  EXPECT_EQ(split_fields(R"("","""")"), (V{"", "\""}));
  EXPECT_EQ(split_fields(R"("Request tokens","Response tokens")"),
            (V{"Request tokens", "Response tokens"}));
}

TEST(CsvSplit, ViewsStayValidAcrossManyQuotedFields) {
  // Many quoted fields in one line: every view must still read its own text at the end.
  std::string line;
  V expected;
  for (int i = 0; i < 200; ++i) {
    line += fmt::format("{}\"v{}\"\"\"", i ? "," : "", i);
    expected.push_back(fmt::format("v{}\"", i));
  }
  EXPECT_EQ(split_fields(line), expected);
}

TEST(CsvSplit, MalformedQuotesAreErrorsNamingTheColumn) {
  EXPECT_EQ(split_fields(R"(a,"bc)"), (V{"ERROR: column 2: unterminated quote"}));
  EXPECT_EQ(split_fields(R"(a,"b""")"), (V{"a", "b\""}));  // "" then the closing quote
  EXPECT_EQ(split_fields(R"(a,"b"")"), (V{"ERROR: column 2: unterminated quote"}));
  EXPECT_EQ(split_fields(R"("a"b,c)"), (V{"ERROR: column 1: text after a closing quote"}));
  EXPECT_EQ(split_fields(R"(a,b"c)"), (V{"ERROR: column 2: stray quote in an unquoted field"}));
  EXPECT_EQ(split_fields(R"(a, "b")"), (V{"ERROR: column 2: stray quote in an unquoted field"}));
}

TEST(CsvSplit, ReusedSplitterForgetsThePreviousLine) {
  csv::Splitter s;
  ASSERT_EQ(s.split(R"("x,y",z,w)"), "");
  ASSERT_EQ(s.split("1,2"), "");
  EXPECT_EQ(V(s.fields().begin(), s.fields().end()), (V{"1", "2"}));
}

TEST(CsvSplit, QuoteFieldRoundTrips) {
  for (const std::string v : {"bf16", "a,b", R"(say "hi")", "", "\"", "line\rend"}) {
    EXPECT_EQ(split_fields(csv::quote_field(v)), (V{v})) << v;
  }
  EXPECT_EQ(csv::quote_field("fp8_e4m3"), "fp8_e4m3");
  EXPECT_EQ(csv::quote_field("a,b"), "\"a,b\"");
}

class TraceCsvQuoting : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kvsim_trace_csv_quoting_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& bytes) const {
    const std::string p = (dir_ / "t.csv").string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  static std::string error_of(const std::string& path, const TraceReadOptions& o = {}) {
    try {
      read_trace(path, o);
    } catch (const std::exception& e) {
      return e.what();
    }
    return {};
  }

  std::filesystem::path dir_;
};

TEST_F(TraceCsvQuoting, QuotedHeaderAndValuesAreRead) {
  const std::string p = write(
      "\"arrived_at\",\"num_prefill_tokens\",num_decode_tokens,\"note\"\n"
      "0.5,\"100\",7,\"a, \"\"quoted\"\" note\"\n"
      "1.25,200,\"9\",plain\n");
  const Trace t = read_trace(p);
  ASSERT_EQ(t.format, TraceFormat::VIDUR);
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_EQ(t.requests[0].input_tokens, 100);
  EXPECT_EQ(t.requests[0].output_tokens, 7);
  EXPECT_EQ(t.requests[1].input_tokens, 200);
  EXPECT_EQ(t.requests[1].output_tokens, 9);
  EXPECT_EQ(t.requests[1].arrival_ns - t.requests[0].arrival_ns, 750'000'000);
}

TEST_F(TraceCsvQuoting, UnterminatedQuoteInTheHeaderIsAnError) {
  // The broken quote swallows the last column name; before, the header was split silently.
  const std::string header = R"(arrived_at,num_prefill_tokens,num_decode_tokens,"note)";
  const std::string p = write(header + "\n0.5,100,7,x\n");
  EXPECT_EQ(
      error_of(p),
      fmt::format("{}:1: field 'header': column 4: unterminated quote (got '{}')", p, header));
  // The same when the format is given (the header is split by the reader, not detection).
  TraceReadOptions o;
  o.format = TraceFormat::VIDUR;
  EXPECT_EQ(
      error_of(p, o),
      fmt::format("{}:1: field 'header': column 4: unterminated quote (got '{}')", p, header));
}

TEST_F(TraceCsvQuoting, HeaderAfterBlankLinesNamesItsLine) {
  const std::string p = write("\n\narrived_at,num_prefill_tokens,\"num_decode_tokens\n");
  EXPECT_EQ(error_of(p), p + ":3: field 'header': column 3: unterminated quote (got "
                             "'arrived_at,num_prefill_tokens,\"num_decode_tokens')");
}

TEST_F(TraceCsvQuoting, BadQuotesInRowsNameLineAndColumn) {
  const std::string p = write(
      "arrived_at,num_prefill_tokens,num_decode_tokens\n"
      "0.5,100,7\n"
      "1.0,\"200,9\n");
  EXPECT_EQ(error_of(p), p + ":3: field 'row': column 2: unterminated quote (got '1.0,\"200,9')");
  const std::string q = write(
      "arrived_at,num_prefill_tokens,num_decode_tokens\n"
      "0.5,1\"00,7\n");
  EXPECT_EQ(error_of(q),
            q + ":2: field 'row': column 2: stray quote in an unquoted field (got '0.5,1\"00,7')");
}

TEST_F(TraceCsvQuoting, SkipBadRowsCountsQuoteErrorsByReason) {
  const std::string p = write(
      "arrived_at,num_prefill_tokens,num_decode_tokens\n"
      "0.5,100,7\n"
      "1.0,\"200,9\n"
      "1.5,300,\"9\"x\n"
      "2.0,400,11\n");
  TraceReadOptions o;
  o.skip_bad_rows = true;
  const Trace t = read_trace(p, o);
  EXPECT_EQ(t.requests.size(), 2u);
  EXPECT_EQ(t.dropped.at("field 'row': column 2: unterminated quote"), 1);
  EXPECT_EQ(t.dropped.at("field 'row': column 3: text after a closing quote"), 1);
}

}  // namespace
}  // namespace kvsim
