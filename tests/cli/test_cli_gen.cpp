// `kvsim gen` end to end: the same seed gives the same bytes, bad specs and flags that would be
// ignored are one-line errors with exit status 2, and the prefix encodings honour their flags.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"

namespace {

namespace fs = std::filesystem;

using kvsim_cli_test::CliRun;

// Runs the kvsim binary with `args`; `redirect` picks what is captured ("2>&1": both streams).
CliRun gen_kvsim(const std::string& args, const std::string& redirect = "2>&1") {
  return kvsim_cli_test::run_kvsim(args, redirect);
}

// The run fails with status 2 and prints exactly the one line "kvsim: error: <message>".
void expect_gen_error(const std::string& args, const std::string& message) {
  SCOPED_TRACE(args);
  const CliRun r = gen_kvsim(args);
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out, fmt::format("kvsim: error: {}\n", message));
}

// The records of gen's output, after checking its header line declares their number.
std::vector<nlohmann::json> records(const std::string& jsonl) {
  std::vector<nlohmann::json> out;
  std::istringstream in(jsonl);
  std::string header;
  std::getline(in, header);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  const nlohmann::json h = nlohmann::json::parse(header);
  EXPECT_EQ(h.at("kvsim_trace"), 1);
  EXPECT_EQ(h.at("records").get<size_t>(), out.size());
  return out;
}

class CliGen : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("kvsim_cli_gen_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(CliGen, SameSeedSameBytesOnStdoutAndInAFile) {
  const std::string flags =
      "gen -n 40 --arrival gamma --rate 3 --cv 2 --input-len lognormal:6,0.7 "
      "--output-len uniform:4,64 --prefix-groups 3 --prefix-tokens 48";
  const CliRun a = gen_kvsim(flags + " --seed 7", "2>/dev/null");
  const CliRun b = gen_kvsim(flags + " --seed 7", "2>/dev/null");
  const CliRun c = gen_kvsim(flags + " --seed 8", "2>/dev/null");
  ASSERT_EQ(a.status, 0);
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  const std::vector<nlohmann::json> recs = records(a.out);
  ASSERT_EQ(recs.size(), 40u);
  for (const auto& r : recs) {
    // 16 tokens per hash id (the default) covering the whole prompt, shared prefix included.
    const int64_t in = r.at("input_tokens");
    EXPECT_GE(in, 48 + 1);
    EXPECT_EQ(r.at("hash_block_size"), 16);
    EXPECT_EQ(static_cast<int64_t>(r.at("hash_ids").size()), (in + 15) / 16);
  }
  const std::string file = path("t.jsonl");
  const CliRun w = gen_kvsim(flags + " --seed 7 -o " + file);
  ASSERT_EQ(w.status, 0) << w.out;
  EXPECT_EQ(w.out.rfind("kvsim gen: wrote 40 requests to " + file, 0), 0u) << w.out;
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes, a.out);
}

TEST_F(CliGen, PrefixEncodingsHonourTheirFlags) {
  const std::string base = "gen -q -n 12 --seed 3 --prefix-groups 2 --prefix-tokens 40 ";
  const CliRun h = gen_kvsim(base + "--hash-block-size 32", "2>/dev/null");
  ASSERT_EQ(h.status, 0);
  for (const auto& r : records(h.out)) {
    const int64_t in = r.at("input_tokens");
    EXPECT_EQ(r.at("hash_block_size"), 32);
    EXPECT_EQ(static_cast<int64_t>(r.at("hash_ids").size()), (in + 31) / 32);
  }
  const CliRun t = gen_kvsim(base + "--prefix-as token-ids --vocab-size 50", "2>/dev/null");
  ASSERT_EQ(t.status, 0);
  for (const auto& r : records(t.out)) {
    const auto& ids = r.at("prompt_token_ids");
    EXPECT_EQ(ids.size(), r.at("input_tokens").get<size_t>());
    for (const auto& id : ids) {
      EXPECT_GE(id.get<int64_t>(), 0);
      EXPECT_LT(id.get<int64_t>(), 50);
    }
  }
}

TEST_F(CliGen, BadSpecsAreOneLineErrors) {
  const std::string forms =
      "(expected fixed:N, uniform:LO,HI, normal:MEAN,SIGMA, lognormal:MU,SIGMA, zipf:S,MAX or "
      "empirical:PATH)";
  expect_gen_error("gen --input-len bogus:1",
                   "--input-len: length distribution 'bogus:1': unknown kind 'bogus' " + forms);
  expect_gen_error("gen --output-len uniform:5",
                   "--output-len: length distribution 'uniform:5': needs 2 number(s) " + forms);
  expect_gen_error("gen --input-len fixed:1x",
                   "--input-len: length distribution 'fixed:1x': '1x' is not a number " + forms);
  expect_gen_error("gen --seed -1", "--seed: '-1' is not a non-negative integer");
  expect_gen_error("gen --seed 18446744073709551616",
                   "--seed: 18446744073709551616 is out of range [0, 18446744073709551615]");
  const std::string missing = path("missing.csv");
  const CliRun r = gen_kvsim("gen --input-len empirical:" + missing);
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.out.find(missing), std::string::npos) << r.out;
}

TEST_F(CliGen, FlagsThatWouldBeIgnoredAreRefused) {
  expect_gen_error("gen --hash-block-size 32",
                   "--hash-block-size needs --prefix-groups > 0 and --prefix-as hash-ids");
  expect_gen_error("gen --vocab-size 100",
                   "--vocab-size needs --prefix-groups > 0 and --prefix-as token-ids");
  const std::string prefixes = "gen --prefix-groups 2 --prefix-tokens 64 ";
  expect_gen_error(prefixes + "--vocab-size 100",
                   "--vocab-size needs --prefix-groups > 0 and --prefix-as token-ids");
  expect_gen_error(prefixes + "--prefix-as token-ids --hash-block-size 32",
                   "--hash-block-size needs --prefix-groups > 0 and --prefix-as hash-ids");
  expect_gen_error("gen --arrival constant --cv 2", "--cv needs --arrival gamma");
  expect_gen_error("gen --prefix-tokens 64", "--prefix-tokens needs --prefix-groups > 0");
  EXPECT_FALSE(fs::exists(path("none.jsonl")));
}

// Traces without hash ids (here: gen without shared prefixes, and a CSV) refuse replay's
// --hash-block-size instead of ignoring it.
TEST_F(CliGen, ReplayRefusesHashBlockSizeForTracesWithoutHashIds) {
  const std::string plain = path("plain.jsonl");
  ASSERT_EQ(gen_kvsim("gen -q -n 5 --seed 1 -o " + plain).status, 0);
  expect_gen_error("replay " + plain + " --step-time fixed:5 --no-progress --hash-block-size 16",
                   "--hash-block-size 16 applies to traces with hash_ids, and " + plain +
                       " (kvsim) has none; drop the flag");
  const std::string csv = path("t.csv");
  std::ofstream(csv) << "arrived_at,num_prefill_tokens,num_decode_tokens\n0.5,100,7\n";
  expect_gen_error("replay " + csv + " --step-time fixed:5 --no-progress --hash-block-size 16",
                   "--hash-block-size 16 applies to traces with hash_ids, and " + csv +
                       " (vidur) has none; drop the flag");
  const std::string hashed = path("hashed.jsonl");
  ASSERT_EQ(
      gen_kvsim("gen -q -n 5 --seed 1 --prefix-groups 1 --prefix-tokens 32 -o " + hashed).status,
      0);
  const CliRun ok =
      gen_kvsim("replay " + hashed + " --step-time fixed:5 --no-progress --hash-block-size 16");
  EXPECT_EQ(ok.status, 0) << ok.out;
}

}  // namespace

namespace {

// Issue 23: normal/lognormal lengths follow uniform's rule (refused when they would mostly clip;
// clipped silently before) and the clipped draws that remain are counted on the summary line.
TEST(CliGenClipping, RefusesMostlyClippedLengthsAndCountsTheRest) {
  expect_gen_error(
      "gen -n 5 --output-len normal:0,10 -o /dev/null",
      "--output-len normal:0,10: 52 % of the draws would fall outside [1, 16777216] and "
      "be clipped (at most 10 % may be; a mean inside the range with a smaller SIGMA "
      "fits)");
  const CliRun r = gen_kvsim("gen -n 2000 --output-len normal:16,10 -o /dev/null");
  EXPECT_EQ(r.status, 0) << r.out;
  // P(16 + 10 z < 0.5) = 6.1 %: about 120 of 2000.
  EXPECT_NE(r.out.find("; clipped to the valid range: 0 input and 1"), std::string::npos) << r.out;
  const CliRun none = gen_kvsim("gen -n 20 -o /dev/null");
  EXPECT_EQ(none.out.find("clipped"), std::string::npos) << none.out;
}

}  // namespace
