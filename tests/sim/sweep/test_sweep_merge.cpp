// --merge validation: every field of every row is checked against its column's type, and shards
// of different sweeps (different sweep_id) are refused.
#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kvsim/sim/sweep/sweep.h"

namespace kvsim {
namespace {

SweepOutcome fake(const SweepPoint& p) {
  SweepOutcome o;
  o.block_size = p.block_size.value_or(16);
  o.num_gpu_blocks = 1000;
  o.gpu_memory_utilization = 0.9;
  o.kv_cache_dtype = "bfloat16";
  o.max_num_seqs = 256;
  o.max_num_batched_tokens = 8192;
  o.requests = 10;
  o.finished = 10;
  o.mean_running = 3.5;
  return o;
}

std::string shard_csv(int64_t index, int64_t count, uint64_t id) {
  SweepAxes axes;
  axes.block_sizes = {8, 16, 32, 64};
  const auto points = expand_sweep(axes);
  std::ostringstream s;
  write_sweep_csv(s, run_sweep(points, fake, {}, 1, {index, count}),
                  static_cast<int64_t>(points.size()), id);
  return s.str();
}

std::string sweep_merge_error(const std::vector<NamedText>& shards) {
  try {
    merge_sweep_csvs(shards);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

// Replaces the `col`-th field (0-based) of line `line` (1-based) of `csv` with `value`.
std::string with_field(const std::string& csv, int line, int col, const std::string& value) {
  std::vector<std::string> lines;
  std::istringstream in(csv);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string& l = lines.at(static_cast<size_t>(line - 1));
  size_t b = 0;
  for (int i = 0; i < col; ++i) b = l.find(',', b) + 1;
  const size_t e = l.find(',', b);
  l = l.substr(0, b) + value + (e == std::string::npos ? "" : l.substr(e));
  std::string out;
  for (const auto& x : lines) out += x + "\n";
  return out;
}

TEST(MergeSweepCsvs, SweepIdIsWrittenAsHexAndRoundTrips) {
  const std::string a = shard_csv(0, 2, 0xabcULL);
  EXPECT_NE(a.find(",0000000000000abc,"), std::string::npos) << a;
  EXPECT_EQ(merge_sweep_csvs(std::vector<NamedText>{{"a", a}, {"b", shard_csv(1, 2, 0xabcULL)}}),
            shard_csv(0, 1, 0xabcULL));
}

TEST(MergeSweepCsvs, RefusesShardsOfDifferentSweeps) {
  const std::string err =
      sweep_merge_error({{"a.csv", shard_csv(0, 2, 1)}, {"b.csv", shard_csv(1, 2, 2)}});
  EXPECT_NE(err.find("b.csv:2: sweep_id 0000000000000002 differs from 0000000000000001 in a.csv:2"),
            std::string::npos)
      << err;
}

TEST(MergeSweepCsvs, RefusesTruncatedAndMalformedRows) {
  const std::string good = shard_csv(0, 1, 7);
  const std::string cut = good.substr(0, good.size() - 4);  // last row cut mid-field
  EXPECT_NE(sweep_merge_error({{"a.csv", cut}}).find("a.csv:5: last line has no newline"),
            std::string::npos);
  std::string extra = good;
  extra.insert(extra.size() - 1, ",1");
  EXPECT_NE(sweep_merge_error({{"a.csv", extra}}).find("a.csv:5: 33 fields, the header has 32"),
            std::string::npos);
  EXPECT_NE(sweep_merge_error({{"a.csv", with_field(good, 3, 0, "-0")}})
                .find("a.csv:3: column 1 (config_index): not a non-negative integer (got '-0')"),
            std::string::npos);
  EXPECT_NE(sweep_merge_error({{"a.csv", with_field(good, 3, 0, "01")}}).find("got '01'"),
            std::string::npos);
  EXPECT_NE(sweep_merge_error({{"a.csv", with_field(good, 4, 15, "abc")}})
                .find("a.csv:4: column 16 (sim_seconds): not a finite number (got 'abc')"),
            std::string::npos);
  EXPECT_NE(sweep_merge_error({{"a.csv", with_field(good, 2, 2, "xyz")}})
                .find("column 3 (sweep_id): not a 16-digit hex sweep id"),
            std::string::npos);
  EXPECT_NE(
      sweep_merge_error({{"a.csv", with_field(good, 2, 6, "\"bf16")}}).find("unterminated quote"),
      std::string::npos);
  // Quoted text fields are accepted.
  EXPECT_EQ(sweep_merge_error({{"a.csv", with_field(good, 2, 6, "\"b,f\"\"16\"")}}), "no error");
  // The splitter's other quote errors (the same rules as the trace readers'), with the column.
  EXPECT_NE(sweep_merge_error({{"a.csv", with_field(good, 2, 6, "bf\"16")}})
                .find("a.csv:2: column 7: stray quote in an unquoted field"),
            std::string::npos);
  EXPECT_NE(sweep_merge_error({{"a.csv", with_field(good, 2, 6, "\"bf\"16")}})
                .find("a.csv:2: column 7: text after a closing quote"),
            std::string::npos);
}

TEST(MergeSweepCsvs, QuotedDtypeRoundTripsThroughWriteAndMerge) {
  // A kv_cache_dtype holding a comma and a quote is written quoted, and merges back unchanged.
  SweepAxes axes;
  axes.block_sizes = {16, 32};
  const auto points = expand_sweep(axes);
  const auto odd = [](const SweepPoint& p) {
    SweepOutcome o = fake(p);
    o.kv_cache_dtype = "fp8,\"e4m3\"";
    return o;
  };
  std::ostringstream s;
  write_sweep_csv(s, run_sweep(points, odd, {}, 1, {0, 1}), 2, 9);
  const std::string csv = s.str();
  EXPECT_NE(csv.find(",\"fp8,\"\"e4m3\"\"\","), std::string::npos) << csv;
  EXPECT_EQ(merge_sweep_csvs(std::vector<NamedText>{{"a.csv", csv}}), csv);
}

// Issue 23: a row that contradicts its own arithmetic or the sweep it claims is refused.
TEST(MergeSweepCsvs, RefusesRowsThatContradictThemselves) {
  const std::string a = shard_csv(0, 2, 7);  // block sizes 8 and 32 (indices 0, 2)
  const std::string b = shard_csv(1, 2, 7);  // block sizes 16 and 64 (indices 1, 3)
  ASSERT_EQ(sweep_merge_error({{"a.csv", a}, {"b.csv", b}}), "no error");
  // Block size 8 -> 16 on row 0: its uniform expectation still says (8 - 1) / 2.
  EXPECT_NE(sweep_merge_error({{"a.csv", with_field(a, 2, 3, "16")}, {"b.csv", b}})
                .find("a.csv:2: expected_padding_per_seq_uniform 3.5 is not (block_size 16 - 1) "
                      "/ 2 = 7.5; refusing to merge an edited or corrupt row"),
            std::string::npos);
  // Both edited consistently: two rows of block size 16, none of 8, so the grid's outermost
  // axis is broken.
  const std::string err = sweep_merge_error(
      {{"a.csv", with_field(with_field(a, 2, 3, "16"), 2, 23, "7.5")}, {"b.csv", b}});
  EXPECT_NE(err.find("a.csv:3: block_size 32 is on 1 row(s), block_size 16 on 2: block size is "
                     "the grid's outermost axis"),
            std::string::npos)
      << err;
  // More finished than requested, another trace's request count, peak above max_num_seqs.
  EXPECT_NE(sweep_merge_error({{"a.csv", with_field(a, 3, 12, "11")}, {"b.csv", b}})
                .find("a.csv:3: finished 11 + rejected 0 is more than its requests 10"),
            std::string::npos);
  EXPECT_NE(sweep_merge_error(
                {{"a.csv", a}, {"b.csv", with_field(with_field(b, 2, 11, "12"), 2, 12, "12")}})
                .find("b.csv:2: requests 12 differs from 10 in a.csv:2"),
            std::string::npos);
  EXPECT_NE(sweep_merge_error({{"a.csv", with_field(a, 2, 16, "300")}, {"b.csv", b}})
                .find("peak_running 300 is above its max_num_seqs 256"),
            std::string::npos);
  // padding per sequence must be the ratio of the two means (to the digits written).
  EXPECT_NE(sweep_merge_error({{"a.csv", with_field(a, 2, 21, "2")}, {"b.csv", b}})
                .find("padding_tokens_per_seq 2 is not padding_tokens_mean 0 / mean_running 3.5"),
            std::string::npos);
  EXPECT_EQ(sweep_merge_error(
                {{"a.csv", with_field(with_field(a, 2, 20, "7"), 2, 21, "2")}, {"b.csv", b}}),
            "no error");
}

TEST(SweepFingerprint, IsFnv1a64) {
  EXPECT_EQ(sweep_fingerprint(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(sweep_fingerprint("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_NE(sweep_fingerprint("--block-sizes=16"), sweep_fingerprint("--block-sizes=32"));
}

}  // namespace
}  // namespace kvsim
