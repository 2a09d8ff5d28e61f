// Malformed traces: one-line "FILE:LINE: field 'NAME': problem (got 'VALUE')" errors,
// --skip-bad-rows counting, gzip input, and fixtures of the layouts not bundled.
#include <gtest/gtest.h>

#include <string>

#include "kvsim/core/param.h"
#include "kvsim/sim/io/line_reader.h"
#include "kvsim/sim/traces/trace.h"

namespace kvsim {
namespace {

std::string fixture(const char* name) {
  return std::string(KVSIM_SOURCE_DIR "/tests/data/traces/") + name;
}

// The message of the TraceError read_trace throws (empty if it does not throw one).
std::string error_of(const std::string& path, const TraceReadOptions& options = {}) {
  try {
    read_trace(path, options);
  } catch (const TraceError& e) {
    return spell_params(e.what(), ParamSpelling::kCli);
  }
  return {};
}

TEST(TraceErrors, BadNumberNamesFileLineAndField) {
  const std::string p = fixture("azure_bad_number.csv");
  EXPECT_EQ(error_of(p), p + ":4: field 'ContextTokens': not an integer token count (got '8x79')");
}

TEST(TraceErrors, NegativeTokens) {
  const std::string p = fixture("azure_negative.csv");
  EXPECT_EQ(error_of(p), p + ":2: field 'GeneratedTokens': negative token count (got '-44')");
}

TEST(TraceErrors, MissingColumn) {
  const std::string p = fixture("azure_missing_column.csv");
  // Detected as Azure from TIMESTAMP + ContextTokens; the third column is missing.
  EXPECT_EQ(error_of(p), p + ":1: field 'GeneratedTokens': missing column in the azure header "
                             "(got 'TIMESTAMP,ContextTokens')");
}

TEST(TraceErrors, MissingValue) {
  const std::string p = fixture("azure_missing_value.csv");
  EXPECT_EQ(error_of(p), p + ":3: field 'GeneratedTokens': missing value: 2 fields, the header has "
                             "3 (got '2023-11-16 18:15:50.9951690,396')");
}

TEST(TraceErrors, ImpossibleDate) {
  const std::string p = fixture("azure_bad_timestamp.csv");
  EXPECT_EQ(error_of(p), p + ":3: field 'TIMESTAMP': not a timestamp YYYY-MM-DD HH:MM:SS[.fffffff] "
                             "(got '2023-02-30 18:15:50.9951690')");
}

TEST(TraceErrors, EmptyFileAndHeaderOnly) {
  const std::string e = fixture("empty.csv");
  EXPECT_EQ(error_of(e), e + ":1: field 'header': empty file, no header or records (got '')");
  const std::string h = fixture("header_only.csv");
  EXPECT_EQ(error_of(h), h + ":1: field 'records': no records in the file (got '')");
}

TEST(TraceErrors, UnknownLayoutAsksForFormat) {
  const std::string p = fixture("unknown_layout.csv");
  EXPECT_EQ(error_of(p), p + ":1: field 'header': unknown trace layout (expected an Azure, Vidur, "
                             "BurstGPT or ShareGPT CSV header or a JSON object; use --format) "
                             "(got 'foo,bar')");
  // Forcing a format reports the column it lacks.
  TraceReadOptions o;
  o.format = TraceFormat::VIDUR;
  EXPECT_EQ(error_of(p, o),
            p + ":1: field 'arrived_at': missing column in the vidur header (got 'foo,bar')");
}

TEST(TraceErrors, TruncatedJsonAtEndOfFileIsAnErrorNotASilentCut) {
  const std::string p = fixture("mooncake_truncated.jsonl");
  const std::string msg = error_of(p);
  const std::string head = p + ":4: field 'record': truncated JSON at the end of the file: column ";
  EXPECT_EQ(msg.substr(0, head.size()), head) << msg;
  EXPECT_NE(msg.find("(got '{\"timestamp\": 3000, \"input_length\": 891, \"output_len')"),
            std::string::npos)
      << msg;
  // Skipping it keeps the three complete lines and counts the fourth.
  TraceReadOptions o;
  o.skip_bad_rows = true;
  const Trace t = read_trace(p, o);
  EXPECT_EQ(t.requests.size(), 3u);
  EXPECT_EQ(t.rows_read, 4);
  EXPECT_EQ(t.dropped_total(), 1);
  ASSERT_EQ(t.bad_row_examples.size(), 1u);
  EXPECT_EQ(t.bad_row_examples[0], msg);
}

TEST(TraceErrors, JsonFieldTypesAndHashIdCount) {
  const std::string h = fixture("mooncake_bad_hash_ids.jsonl");
  EXPECT_EQ(error_of(h), h + ":3: field 'hash_ids': expected ceil(1025/512) = 3 ids for a hash "
                             "block size of 512 (got '2 ids')");
  // A wrong --hash-block-size shows up the same way on the first record.
  TraceReadOptions o;
  o.hash_block_size = 16;
  const std::string real = KVSIM_SOURCE_DIR "/traces/conversation_trace.jsonl";
  EXPECT_EQ(error_of(real, o), real +
                                   ":1: field 'hash_ids': expected ceil(6758/16) = 423 ids for a "
                                   "hash block size of 16 (got '14 ids')");
  const std::string b = fixture("mooncake_bad_types.jsonl");
  EXPECT_EQ(error_of(b), b + ":3: field 'timestamp': not a number (got '\"soon\"')");
}

TEST(TraceErrors, SkipBadRowsCountsByReason) {
  const std::string p = fixture("azure_mixed_bad.csv");
  EXPECT_EQ(error_of(p), p + ":3: field 'ContextTokens': not an integer token count (got 'abc')");
  TraceReadOptions o;
  o.skip_bad_rows = true;
  const Trace t = read_trace(p, o);
  EXPECT_EQ(t.rows_read, 8);  // the blank line is not a row
  ASSERT_EQ(t.requests.size(), 3u);
  EXPECT_EQ(t.requests[0].source_line, 2);
  EXPECT_EQ(t.requests[1].source_line, 4);
  EXPECT_EQ(t.requests[2].source_line, 8);
  EXPECT_EQ(t.requests[2].arrival_ns, 7'819'410'000);  // 18:15:54.5 - 18:15:46.68059
  EXPECT_EQ(t.dropped_total(), 5);
  EXPECT_EQ(t.dropped.at("field 'ContextTokens': not an integer token count"), 1);
  EXPECT_EQ(t.dropped.at("field 'GeneratedTokens': not an integer token count"), 1);
  EXPECT_EQ(t.dropped.at("field 'GeneratedTokens': missing value: 2 fields, the header has 3"), 1);
  EXPECT_EQ(t.dropped.at("field 'TIMESTAMP': not a timestamp YYYY-MM-DD HH:MM:SS[.fffffff]"), 1);
  EXPECT_EQ(t.dropped.at("field 'row': 4 fields, the header has 3"), 1);
  EXPECT_EQ(t.bad_row_examples.size(), 5u);
  EXPECT_EQ(t.bad_row_examples[4], p + ":10: field 'row': 4 fields, the header has 3 (got "
                                       "'2023-11-16 18:15:55.0000000,1,1,1')");
}

TEST(TraceErrors, GzipIsDetectedByMagicBytes) {
  const Trace t = read_trace(fixture("azure_head.csv.gz"));
  EXPECT_EQ(t.format, TraceFormat::AZURE);
  ASSERT_EQ(t.requests.size(), 4u);
  EXPECT_EQ(t.requests[1].arrival_ns, 4'314'579'000);
  EXPECT_EQ(t.requests[3].input_tokens, 10);
  EXPECT_EQ(t.requests[3].arrival_ns, 4'819'410'000);
  bool gz = false;
  read_text_file(fixture("azure_head.csv.gz"), {}, &gz);
  EXPECT_TRUE(gz);
}

TEST(TraceErrors, CutGzipStreamIsAnError) {
  const std::string p = fixture("mooncake_cut.jsonl.gz");
  try {
    read_trace(p);
    FAIL() << "a cut gzip stream was accepted";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(p + ": gzip data cut short or corrupt after ", 0), 0u) << msg;
  }
}

TEST(TraceErrors, MissingFileIsAnError) {
  const std::string p = fixture("no_such_file.csv");
  try {
    read_trace(p);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), p + ": cannot open: No such file or directory");
  }
}

TEST(TraceFixtures, BurstGptEightColumnLayoutByName) {
  const Trace t = read_trace(fixture("burstgpt3_sample.csv"));
  EXPECT_EQ(t.format, TraceFormat::BURSTGPT);
  EXPECT_EQ(t.rows_read, 5);
  ASSERT_EQ(t.requests.size(), 4u);
  EXPECT_EQ(t.dropped.at("failed request (zero response tokens)"), 1);
  EXPECT_EQ(t.requests[0].input_tokens, 906);
  EXPECT_EQ(t.requests[0].output_tokens, 446);
  EXPECT_EQ(t.requests[0].session_id, "1722ac82-0a46-4bf0-aa08-89794e7a2b3f");
  EXPECT_EQ(t.requests[1].arrival_ns, 51'000'000'000);
  EXPECT_EQ(t.requests[3].arrival_ns, 91'250'000'000);  // 19440201.25 - 19440110.0
  EXPECT_EQ(t.requests[3].session_id, "");
}

TEST(TraceFixtures, BailianFloatSecondsAnd16TokenBlocks) {
  const Trace t = read_trace(fixture("bailian_sample.jsonl"));
  EXPECT_EQ(t.format, TraceFormat::BAILIAN);
  ASSERT_EQ(t.requests.size(), 3u);
  // Sorted by arrival: 0.125, 1.0000001, 1.5 -> rebased to the first.
  EXPECT_EQ(t.requests[0].arrival_ns, 0);
  EXPECT_EQ(t.requests[1].arrival_ns, 875'000'100);
  EXPECT_EQ(t.requests[1].source_line, 3);
  EXPECT_EQ(t.requests[2].arrival_ns, 1'375'000'000);
  EXPECT_EQ(t.requests[2].hash_block_size, 16);
  EXPECT_EQ(*t.requests[2].hash_ids, (std::vector<uint64_t>{10, 11, 12, 13, 14}));
}

TEST(TraceFixtures, KvsimNativeFields) {
  const Trace t = read_trace(fixture("kvsim_sample.jsonl"));
  EXPECT_EQ(t.format, TraceFormat::KVSIM);
  ASSERT_EQ(t.requests.size(), 3u);
  // Sorted: 1e-9 s (line 3), 0.25 s (line 2), 0.5 s (line 1).
  EXPECT_EQ(t.requests[0].source_line, 3);
  EXPECT_EQ(t.requests[0].input_tokens, 0);  // recorded faithfully; replay decides
  EXPECT_EQ(t.requests[1].arrival_ns, 249'999'999);
  EXPECT_EQ(t.requests[1].hash_block_size, 16);
  EXPECT_EQ(t.requests[1].hash_ids->size(), 3u);
  EXPECT_EQ(t.requests[2].arrival_ns, 499'999'999);
  EXPECT_EQ(t.requests[2].priority, 2);
  EXPECT_EQ(t.requests[2].session_id, "s-1");
  EXPECT_EQ(*t.requests[2].prompt_token_ids, (std::vector<int32_t>{1, 2, 3, 4, 5}));
  EXPECT_FALSE(t.requests[2].hash_ids);
}

}  // namespace
}  // namespace kvsim
