// Hostile trace input: arrivals beyond the clock's range, JSON that fails on the first line,
// binary bytes in a row, duplicate column names and keys, gzip with trailing bytes, directories.
// Each must be one exact line naming the file, line and field - never a crash or a silent guess.
#include <zlib.h>

#include <gtest/gtest.h>

#include "scratch_dir_test.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "kvsim/core/param.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/io/line_reader.h"
#include "kvsim/sim/traces/trace.h"
#include "kvsim/sim/traces/trace_writer.h"

namespace kvsim {
namespace {

class TraceRobustness : public kvsim_test::ScratchDirTest {
 protected:
  // The message read_trace throws (any exception), or "" when it reads the file.
  static std::string error_of(const std::string& path) {
    try {
      read_trace(path);
    } catch (const std::exception& e) {
      return spell_params(e.what(), ParamSpelling::kCli);
    }
    return {};
  }
};

const std::string kVidurHeader = "arrived_at,num_prefill_tokens,num_decode_tokens\n";

TEST_F(TraceRobustness, ArrivalBeyondTwoToTheSixtyTwoIsAnErrorNamingTheRow) {
  // The reviewer's file: the second arrival is INT64_MAX ns, which left the replay clock no room.
  const std::string p = write("v.csv", kVidurHeader + "0,100,5\n9223372036.854775807,100,5\n");
  EXPECT_EQ(error_of(p), p + ":3: field 'arrived_at': arrival more than 2^62 ns (about 146 "
                             "years) after the first request (got '9223372036.854775807 s')");
  // 2^62 ns exactly is still accepted.
  const std::string ok = write("ok.csv", kVidurHeader + "0,100,5\n4611686018.427387904,100,5\n");
  const Trace t = read_trace(ok);
  EXPECT_EQ(t.requests[1].arrival_ns, kMaxArrivalNs);
  // The difference itself overflowing int64 (an arrival before 1970 and one after 2200).
  const std::string azure = write("a.csv",
                                  "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                  "1700-01-01 00:00:00,10,5\n2250-01-01 00:00:00,10,5\n");
  EXPECT_EQ(error_of(azure), azure +
                                 ":3: field 'TIMESTAMP': arrival more than 2^62 ns (about 146 "
                                 "years) after the first request (got 'beyond 292 years')");
}

// Azure rows in the plain shape are read without the CSV splitter; every other row must still
// read (or fail) exactly as the general path reads it.
TEST_F(TraceRobustness, AzureRowsOffThePlainShapeReadAsTheGeneralPathReadsThem) {
  const std::string mixed = write("mixed.csv",
                                  "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                  "2023-11-16 18:15:46.6805900,374,44\n"
                                  "2023-11-16 18:15:50.5, 5 ,7\t\n"
                                  "\"2023-11-16 18:15:51\",\"6\",8\n"
                                  "2023-11-16T18:15:52,+9,3\r\n"
                                  "2023-11-16 18:15:53.25,10,4\n");
  const Trace t = read_trace(mixed);
  ASSERT_EQ(t.requests.size(), 5U);
  const std::vector<std::array<int64_t, 4>> want = {{0, 374, 44, 2},
                                                    {3'819'410'000, 5, 7, 3},
                                                    {4'319'410'000, 6, 8, 4},
                                                    {5'319'410'000, 9, 3, 5},
                                                    {6'569'410'000, 10, 4, 6}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(t.requests[i].arrival_ns, want[i][0]) << i;
    EXPECT_EQ(t.requests[i].input_tokens, want[i][1]) << i;
    EXPECT_EQ(t.requests[i].output_tokens, want[i][2]) << i;
    EXPECT_EQ(t.requests[i].source_line, want[i][3]) << i;
  }
  const std::string head = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,2\n";
  const std::string extra = write("extra.csv", head + "2023-11-16 18:15:47,1,2,3\n");
  EXPECT_EQ(error_of(extra), extra +
                                 ":3: field 'row': 4 fields, the header has 3 (got "
                                 "'2023-11-16 18:15:47,1,2,3')");
  const std::string negative = write("neg.csv", head + "2023-11-16 18:15:47,-1,2\n");
  EXPECT_EQ(error_of(negative),
            negative + ":3: field 'ContextTokens': negative token count (got '-1')");
  const std::string big = write("big.csv", head + "2023-11-16 18:15:47,1,2147483648\n");
  EXPECT_EQ(error_of(big),
            big + ":3: field 'GeneratedTokens': token count out of range (got '2147483648')");
  const std::string hour = write("hour.csv", head + "2023-11-16 24:00:00,1,2\n");
  EXPECT_EQ(error_of(hour), hour +
                                ":3: field 'TIMESTAMP': not a timestamp "
                                "YYYY-MM-DD HH:MM:SS[.fffffff] (got '2023-11-16 24:00:00')");
  const std::string nul = write("nul.csv", head + std::string("2023-11-16 18:15:47,1,2\0\n", 26));
  EXPECT_NE(error_of(nul).find(":3: field 'GeneratedTokens'"), std::string::npos) << error_of(nul);
}

TEST_F(TraceRobustness, TimeScaleBeyondTheArrivalLimitNamesTheFlag) {
  const std::string p = write("v.csv", kVidurHeader + "0,100,5\n4000000000,100,5\n");
  TraceReadOptions o;
  o.time_scale = 2;
  try {
    read_trace(p, o);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(spell_params(e.what(), ParamSpelling::kCli),
              "--time-scale 2 puts the arrival of line 3 beyond 2^62 ns (about 146 years)");
  }
}

TEST_F(TraceRobustness, RequestLongerThanInt32NamesFileLineAndFields) {
  const std::string p = write("long.csv", kVidurHeader + "0,100,5\n1,2147483647,5\n");
  const Trace t = read_trace(p);
  try {
    default_max_model_len(t);
    FAIL() << "no error";
  } catch (const TraceError& e) {
    EXPECT_EQ(std::string(e.what()),
              p + ":3: field 'num_prefill_tokens+num_decode_tokens': request of 2147483652 "
                  "tokens; max_model_len (its length + 1) must fit in 2^31 - 1 tokens (got "
                  "'2147483647+5')");
  }
}

TEST_F(TraceRobustness, FirstLineJsonErrorsCarryTheParserMessage) {
  const std::string tail = ", \"input_length\": 5, \"output_length\": 3}";
  const std::string overflow = write("o.jsonl", "{\"timestamp\": 1e400" + tail + "\n");
  EXPECT_EQ(error_of(overflow), overflow +
                                    ":1: field 'record': malformed JSON: number overflow "
                                    "parsing '1e400' (got '{\"timestamp\": 1e400, "
                                    "\"input_length\": 5, \"output_length\": 3}')");
  const std::string nan = write("n.jsonl", "\n{\"timestamp\": NaN" + tail + "\n");
  EXPECT_EQ(error_of(nan).rfind(nan + ":2: field 'record': malformed JSON: column 15: syntax error "
                                      "while parsing value - invalid literal",
                                0),
            0u)
      << error_of(nan);
  const std::string two = write("t.jsonl", "{\"timestamp\": 1" + tail + "{\"a\": 1}\n");
  EXPECT_EQ(error_of(two).rfind(two + ":1: field 'record': malformed JSON: column 56: syntax error "
                                      "while parsing value - unexpected '{'; expected end of input",
                                0),
            0u)
      << error_of(two);
  // Bad UTF-8: the parser's message quotes the raw byte; the error shows it escaped.
  const std::string utf8 = write("u.jsonl", "{\"timestamp\": \"\xff\"" + tail + "\n");
  const std::string msg = error_of(utf8);
  EXPECT_EQ(msg.rfind(utf8 + ":1: field 'record': malformed JSON: column 16: syntax error while "
                             "parsing value - invalid string: ill-formed UTF-8 byte; last read: "
                             "'\"\\xff' (got '{\"timestamp\": \"\\xff\", ",
                      0),
            0u)
      << msg;
}

TEST_F(TraceRobustness, BinaryBytesInARowAreEscapedAndTheMessageIsWhole) {
  const std::string p = write("nul.csv", kVidurHeader + std::string("0,1\0"
                                                                    "00,5\n",
                                                                    9));
  EXPECT_EQ(error_of(p),
            p + ":2: field 'num_prefill_tokens': not an integer token count (got '1\\x0000')");
  const std::string b = write("bin.csv", kVidurHeader + "0,1\xff\xfe\x01\t,5\n");
  EXPECT_EQ(error_of(b), b + ":2: field 'num_prefill_tokens': not an integer token count (got "
                             "'1\\xff\\xfe\\x01')");
  // Valid UTF-8 stays readable; a long value is cut at 80 bytes.
  const std::string u = write("u.csv", kVidurHeader + "0,d\xc3\xa9j\xc3\xa0,5\n");
  EXPECT_EQ(
      error_of(u),
      u + ":2: field 'num_prefill_tokens': not an integer token count (got 'd\xc3\xa9j\xc3\xa0')");
  const std::string l = write("l.csv", kVidurHeader + "0," + std::string(200, '7') + "x,5\n");
  EXPECT_EQ(error_of(l), l + ":2: field 'num_prefill_tokens': not an integer token count (got '" +
                             std::string(80, '7') + "...')");
}

TEST_F(TraceRobustness, DuplicateCsvColumnIsNamed) {
  const std::string p = write(
      "dup.csv", "arrived_at,num_prefill_tokens,num_decode_tokens,num_prefill_tokens\n0,1,2,3\n");
  EXPECT_EQ(error_of(p), p + ":1: field 'num_prefill_tokens': column name given twice in the "
                             "header (got 'arrived_at,num_prefill_tokens,num_decode_tokens,"
                             "num_prefill_tokens')");
}

TEST_F(TraceRobustness, DuplicateJsonKeyIsNamed) {
  const std::string p = write("dup.jsonl",
                              "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3, "
                              "\"hash_ids\": [1]}\n"
                              "{\"timestamp\": 2, \"input_length\": 5, \"output_length\": 3, "
                              "\"input_length\": 7}\n");
  EXPECT_EQ(error_of(p), p + ":2: field 'input_length': key given twice in the record (got "
                             "'{\"timestamp\": 2, \"input_length\": 5, \"output_length\": 3, "
                             "\"input_length\": 7}')");
  // Keys the reader ignores count too: the record is ambiguous either way.
  const std::string q = write("dup2.jsonl",
                              "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3, "
                              "\"x\": 1, \"x\": 2}\n");
  // On the first line the strict parse of format detection names it.
  EXPECT_EQ(error_of(q).rfind(q + ":1: field 'record': key \"x\" given twice in one object", 0), 0u)
      << error_of(q);
}

TEST_F(TraceRobustness, GzipTrailingGarbageIsAnErrorConcatenatedMembersAreRead) {
  TraceRequest r;
  r.input_tokens = 10;
  r.output_tokens = 2;
  // Two gzip members (zlib's gz API writes one per file): the header declares both records.
  const auto gzip_member = [&](const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string line = format_kvsim_jsonl(r) + "\n";
  const std::string member = gzip_member("one.gz", kvsim_jsonl_header(2) + "\n" + line);
  ASSERT_GT(member.size(), 10u);

  const std::string garbage = write("garbage.jsonl.gz", member + "garbage");
  EXPECT_EQ(error_of(garbage),
            fmt::format("{}: 7 bytes of trailing garbage after the gzip data (from byte {} of the "
                        "file)",
                        garbage, member.size()));
  const std::string two = write("two.jsonl.gz", member + gzip_member("second.gz", line));
  EXPECT_EQ(read_trace(two).requests.size(), 2u);
}

// --hash-block-size only says how to read hash_ids: refused where the trace has none, since it
// would be silently ignored there.
TEST_F(TraceRobustness, HashBlockSizeWithoutHashIdsIsRefused) {
  TraceReadOptions o;
  o.hash_block_size = 16;
  const auto error_with = [&](const std::string& path) {
    try {
      read_trace(path, o);
    } catch (const std::invalid_argument& e) {
      return spell_params(e.what(), ParamSpelling::kCli);
    }
    return std::string();
  };
  const std::string csv = write("v.csv", kVidurHeader + "0.5,100,7\n");
  EXPECT_EQ(error_with(csv), "--hash-block-size 16 applies to traces with hash_ids, and " + csv +
                                 " (vidur) has none; drop the flag");
  const std::string jsonl =
      write("k.jsonl", "{\"arrival_s\": 0, \"input_tokens\": 5, \"output_tokens\": 2}\n");
  EXPECT_EQ(error_with(jsonl), "--hash-block-size 16 applies to traces with hash_ids, and " +
                                   jsonl + " (kvsim) has none; drop the flag");
  // With hash_ids in any record the flag is used: it re-reads them at 16 tokens per id.
  const std::string some = write("s.jsonl",
                                 "{\"arrival_s\": 0, \"input_tokens\": 5, \"output_tokens\": 2}\n"
                                 "{\"arrival_s\": 1, \"input_tokens\": 33, \"output_tokens\": "
                                 "2, \"hash_ids\": [1, 2, 3]}\n");
  const Trace t = read_trace(some, o);
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_EQ(t.requests[1].hash_block_size, 16);
}

TEST_F(TraceRobustness, DirectoryIsNamedAsSuch) {
  EXPECT_EQ(error_of(dir_.string()), dir_.string() + ": is a directory, not a file to read");
}

}  // namespace
}  // namespace kvsim
