// Sweep library: grid expansion, sharding, parallel determinism, CSV merge, padding expectation.
#include <atomic>
#include <exception>
#include <new>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kvsim/sim/sweep/sweep.h"

namespace kvsim {
namespace {

std::vector<SequenceLengths> random_lengths(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> in(1, 3000), out(1, 400);
  std::vector<SequenceLengths> v;
  for (int i = 0; i < n; ++i) v.push_back({in(rng), out(rng)});
  return v;
}

// A deterministic stand-in for a replay: every number is a function of the point only.
SweepOutcome fake_replay(const SweepPoint& p) {
  SweepOutcome o;
  o.block_size = p.block_size.value_or(16);
  o.num_gpu_blocks = p.num_gpu_blocks.value_or(1000);
  o.kv_cache_dtype = p.kv_cache_dtype.value_or("bfloat16");
  o.max_num_seqs = p.max_num_seqs.value_or(256);
  o.max_num_batched_tokens = p.max_num_batched_tokens.value_or(8192);
  o.requests = 100;
  o.finished = 100 - p.index % 3;
  o.mean_running = 10.0 + p.index / 7.0;
  o.padding_tokens_mean = o.mean_running * (o.block_size - 1) / 2.0;
  o.padding_fraction_mean = 0.001 * o.block_size;
  o.ttft_p50_s = 0.1 * static_cast<double>(p.index + 1) / 3.0;
  return o;
}

std::string csv_of(const std::vector<SweepRow>& rows, int64_t n) {
  std::ostringstream s;
  write_sweep_csv(s, rows, n);
  return s.str();
}

SweepAxes three_axes() {
  SweepAxes a;
  a.block_sizes = {1, 8, 16, 32, 64, 128, 256};
  a.kv_cache_dtypes = {"bfloat16", "fp8"};
  a.max_num_seqs = {64, 256};
  return a;
}

TEST(ExpandSweep, CartesianProductInDocumentedOrder) {
  const auto points = expand_sweep(three_axes());
  ASSERT_EQ(points.size(), 7u * 2 * 2);
  for (size_t i = 0; i < points.size(); ++i) EXPECT_EQ(points[i].index, static_cast<int64_t>(i));
  EXPECT_EQ(points[0].describe(), "block_size=1 kv_cache_dtype=bfloat16 max_num_seqs=64");
  EXPECT_EQ(points[1].describe(), "block_size=1 kv_cache_dtype=bfloat16 max_num_seqs=256");
  EXPECT_EQ(points[2].describe(), "block_size=1 kv_cache_dtype=fp8 max_num_seqs=64");
  EXPECT_EQ(points[4].describe(), "block_size=8 kv_cache_dtype=bfloat16 max_num_seqs=64");
  EXPECT_FALSE(points[0].gpu_memory_utilization.has_value());
  const auto base = expand_sweep(SweepAxes{});
  ASSERT_EQ(base.size(), 1u);
  EXPECT_EQ(base[0].describe(), "base");
}

TEST(ExpandSweep, RejectsBadAxes) {
  SweepAxes a;
  a.block_sizes = {16, 0};
  EXPECT_THROW(expand_sweep(a), std::invalid_argument);
  a.block_sizes = {16, 16};
  EXPECT_THROW(expand_sweep(a), std::invalid_argument);
  a = {};
  a.gpu_memory_utilizations = {0.9, 1.2};
  EXPECT_THROW(expand_sweep(a), std::invalid_argument);
  a = {};
  a.gpu_memory_utilizations = {0.9};
  a.num_gpu_blocks = {1000};
  EXPECT_THROW(expand_sweep(a), std::invalid_argument);
}

TEST(ParseShard, ValidAndInvalid) {
  const ShardSpec s = parse_shard("2/5");
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 5);
  EXPECT_TRUE(s.contains(7));
  EXPECT_FALSE(s.contains(8));
  for (const char* bad : {"", "3", "5/5", "-1/4", "a/4", "1/0", "1/4x", "/4"}) {
    EXPECT_THROW(parse_shard(bad), std::invalid_argument) << bad;
  }
}

TEST(RunSweep, JobsDoNotChangeOutput) {
  const auto points = expand_sweep(three_axes());
  const auto lengths = random_lengths(200, 1);
  const std::string one = csv_of(run_sweep(points, fake_replay, lengths, 1), 28);
  const std::string two = csv_of(run_sweep(points, fake_replay, lengths, 2), 28);
  const std::string many = csv_of(run_sweep(points, fake_replay, lengths, 16), 28);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, many);
  // Header + one line per config.
  EXPECT_EQ(std::count(one.begin(), one.end(), '\n'), 29);
}

TEST(RunSweep, RunsEveryPointOnceAcrossThreads) {
  const auto points = expand_sweep(three_axes());
  std::atomic<int> calls{0};
  auto counting = [&](const SweepPoint& p) {
    ++calls;
    return fake_replay(p);
  };
  const auto rows = run_sweep(points, counting, {}, 4);
  EXPECT_EQ(calls.load(), 28);
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i].point.index, static_cast<int64_t>(i));
}

TEST(RunSweep, ShardMergeRoundTripIsByteIdentical) {
  const auto points = expand_sweep(three_axes());
  const auto lengths = random_lengths(100, 2);
  const int64_t n = static_cast<int64_t>(points.size());
  const std::string whole = csv_of(run_sweep(points, fake_replay, lengths, 1), n);
  for (int64_t count : {1, 2, 3, 5, 40}) {
    std::vector<NamedText> shards;
    for (int64_t i = count - 1; i >= 0; --i) {  // reverse order: merge must sort
      const auto rows = run_sweep(points, fake_replay, lengths, 2, ShardSpec{i, count});
      for (const SweepRow& r : rows) EXPECT_EQ(r.point.index % count, i);
      shards.push_back({"shard" + std::to_string(i) + ".csv", csv_of(rows, n)});
    }
    EXPECT_EQ(merge_sweep_csvs(shards), whole) << count << " shards";
  }
}

TEST(MergeSweepCsvs, DetectsMismatchesDuplicatesAndMissing) {
  const auto points = expand_sweep(three_axes());
  const int64_t n = static_cast<int64_t>(points.size());
  const std::string s0 = csv_of(run_sweep(points, fake_replay, {}, 1, {0, 2}), n);
  const std::string s1 = csv_of(run_sweep(points, fake_replay, {}, 1, {1, 2}), n);
  const auto message = [](std::vector<NamedText> shards) {
    try {
      merge_sweep_csvs(shards);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"a.csv", s0}}).find("14 of 28 configs missing (first: 1,3,5"),
            std::string::npos);
  EXPECT_NE(message({{"a.csv", s0}, {"b.csv", s0}})
                .find("b.csv:2: config_index 0 already given "
                      "in a.csv:2"),
            std::string::npos);
  std::string bad_header = s1;
  bad_header[0] = 'X';
  EXPECT_NE(message({{"a.csv", s0}, {"b.csv", bad_header}}).find("b.csv:1: header differs"),
            std::string::npos);
  const std::string other_sweep = csv_of(run_sweep(points, fake_replay, {}, 1, {1, 2}), n + 1);
  EXPECT_NE(message({{"a.csv", s0}, {"b.csv", other_sweep}}).find("num_configs 29 differs"),
            std::string::npos);
  EXPECT_NE(message({{"a.csv", ""}}).find("a.csv: empty file"), std::string::npos);
  EXPECT_NE(message({{"a.csv", s0 + "x,1,2\n"}}).find("a.csv:16: 3 fields, the header has 32"),
            std::string::npos);
  EXPECT_NE(message({}).find("no input files"), std::string::npos);
}

TEST(RunSweep, RunnerErrorNamesTheLowestFailingConfig) {
  const auto points = expand_sweep(three_axes());
  auto failing = [](const SweepPoint& p) -> SweepOutcome {
    if (p.index == 5 || p.index == 9) throw std::runtime_error("pool too small");
    return fake_replay(p);
  };
  for (int jobs : {1, 3}) {
    try {
      run_sweep(points, failing, {}, jobs);
      ADD_FAILURE() << "no error";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(),
                   "sweep config 5 (block_size=8 kv_cache_dtype=bfloat16 max_num_seqs=256): pool "
                   "too small");
    }
  }
  EXPECT_THROW(run_sweep(points, fake_replay, {}, 0), std::invalid_argument);
}

TEST(RunSweep, RunnerErrorsKeepTheirTypeAndNestTheOriginal) {
  const auto points = expand_sweep(three_axes());
  auto bad_config = [](const SweepPoint& p) -> SweepOutcome {
    if (p.index >= 2) throw std::invalid_argument("bad pool");
    return fake_replay(p);
  };
  try {
    run_sweep(points, bad_config, {}, 2);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("sweep config 2 (", 0), 0u) << e.what();
    try {
      std::rethrow_if_nested(e);
      ADD_FAILURE() << "no nested exception";
    } catch (const std::invalid_argument& inner) {
      EXPECT_STREQ(inner.what(), "bad pool");
    }
  }
  auto oom = [](const SweepPoint& p) -> SweepOutcome {
    if (p.index == 1) throw std::bad_alloc();
    return fake_replay(p);
  };
  EXPECT_THROW(run_sweep(points, oom, {}, 3), std::bad_alloc);
}

TEST(RunSweep, NoPointStartsAfterAFailure) {
  const auto points = expand_sweep(three_axes());
  ASSERT_GT(points.size(), 4u);
  std::atomic<int> started{0};
  auto fail_first = [&](const SweepPoint& p) -> SweepOutcome {
    started.fetch_add(1);
    if (p.index == 0) throw std::runtime_error("first");
    return fake_replay(p);
  };
  EXPECT_THROW(run_sweep(points, fail_first, {}, 1), std::runtime_error);
  EXPECT_EQ(started.load(), 1);
}

// Brute force over every length a request holds (see sweep.h for the definition).
PaddingExpectation brute_force(const std::vector<SequenceLengths>& reqs, int bs) {
  double waste = 0, used = 0, steps = 0;
  for (const auto& r : reqs) {
    const int64_t out = std::max<int64_t>(r.output_tokens, 1);
    for (int64_t l = r.input_tokens; l <= r.input_tokens + out - 1; ++l) {
      const int64_t w = (bs - l % bs) % bs;
      waste += static_cast<double>(w);
      used += static_cast<double>(l + w);
      steps += 1;
    }
  }
  return {(bs - 1) / 2.0, waste / steps, waste / used};
}

TEST(ExpectedPadding, ClosedFormMatchesBruteForce) {
  const auto reqs = random_lengths(300, 3);
  for (int bs : {1, 2, 8, 16, 17, 64, 256, 1024}) {
    const PaddingExpectation e = expected_padding(reqs, bs);
    const PaddingExpectation b = brute_force(reqs, bs);
    EXPECT_DOUBLE_EQ(e.uniform_per_seq, b.uniform_per_seq) << bs;
    EXPECT_NEAR(e.per_seq, b.per_seq, 1e-9 * (1 + b.per_seq)) << bs;
    EXPECT_NEAR(e.fraction, b.fraction, 1e-12) << bs;
  }
}

TEST(ExpectedPadding, HandValuesAndLimits) {
  // One request, input 5, output 3, bs 4: lengths 5, 6, 7 waste 3, 2, 1 -> 2 per step;
  // used = 8 + 8 + 8 = 24 -> fraction 6/24.
  const std::vector<SequenceLengths> one{{5, 3}};
  const PaddingExpectation e = expected_padding(one, 4);
  EXPECT_DOUBLE_EQ(e.per_seq, 2.0);
  EXPECT_DOUBLE_EQ(e.fraction, 0.25);
  EXPECT_DOUBLE_EQ(e.uniform_per_seq, 1.5);
  EXPECT_EQ(expected_padding(one, 1).per_seq, 0.0);
  // Long uniform-ish outputs make the exact expectation approach (bs - 1) / 2.
  const std::vector<SequenceLengths> long_out{{1, 16 * 1000}};
  EXPECT_NEAR(expected_padding(long_out, 16).per_seq, 7.5, 0.01);
  EXPECT_THROW(expected_padding(one, 0), std::invalid_argument);
  EXPECT_EQ(expected_padding({}, 16).per_seq, 0.0);
}

TEST(ExpectedPadding, GrowsWithBlockSize) {
  const auto reqs = random_lengths(500, 4);
  double prev = -1;
  for (int bs : {1, 8, 16, 32, 64, 128, 256}) {
    const double f = expected_padding(reqs, bs).fraction;
    EXPECT_GT(f, prev) << bs;
    prev = f;
  }
}

TEST(FormatSweepTable, OneLinePerRowPlusHeader) {
  const auto points = expand_sweep(three_axes());
  const std::string t = format_sweep_table(run_sweep(points, fake_replay, {}, 1));
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 29);
  EXPECT_NE(t.find("pad%exp"), std::string::npos);
}

}  // namespace
}  // namespace kvsim
