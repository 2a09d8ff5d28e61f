// `kvsim sweep` end to end: CSV determinism across --jobs, --shard/--merge round trip, errors.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "cli_grid_fixture.h"
#include "cli_run.h"

namespace kvsim_cli_test {
namespace {

namespace fs = std::filesystem;

class CliSweep : public CliGridFixture {
 protected:
  // 120 requests, 10 ms apart.
  CliSweep()
      : CliGridFixture({.seed = 11,
                        .requests = 120,
                        .gap_s = 0.01,
                        .in_lo = 20,
                        .in_hi = 1500,
                        .out_lo = 5,
                        .out_hi = 200}) {}
  std::string sweep(const std::string& extra) const {
    return cat({"sweep ", path("trace.csv"),
                " --model qwen2.5-7b --gpu rtx4090 --max-model-len 2048 --step-time fixed:5"
                " --block-sizes 8,16,64 --num-gpu-blocks 300,4000 --max-num-seqs 16,128 -q ",
                extra});
  }
};

TEST_F(CliSweep, JobsDoNotChangeTheCsv) {
  ASSERT_EQ(run_kvsim(sweep("--jobs 1 --csv " + path("j1.csv"))).status, 0);
  const CliRun r = run_kvsim(sweep("--jobs 2 --csv " + path("j2.csv")));
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string j1 = slurp(dir_ / "j1.csv");
  EXPECT_EQ(std::count(j1.begin(), j1.end(), '\n'), 1 + 3 * 2 * 2);
  EXPECT_EQ(j1, slurp(dir_ / "j2.csv"));
  EXPECT_EQ(j1.rfind("config_index,num_configs,sweep_id,block_size,", 0), 0u);
}

TEST_F(CliSweep, ShardThenMergeEqualsUnsharded) {
  ASSERT_EQ(run_kvsim(sweep("--csv " + path("all.csv"))).status, 0);
  for (int i = 0; i < 3; ++i) {
    const std::string n = std::to_string(i);
    const CliRun r =
        run_kvsim(sweep(cat({"--jobs 2 --shard ", n, "/3 --csv ", path(cat({"s", n, ".csv"}))})));
    ASSERT_EQ(r.status, 0) << r.out;
  }
  const CliRun m = run_kvsim("sweep --merge " + path("s2.csv") + " " + path("s0.csv") + " " +
                             path("s1.csv") + " -o " + path("merged.csv"));
  ASSERT_EQ(m.status, 0) << m.out;
  EXPECT_EQ(slurp(dir_ / "merged.csv"), slurp(dir_ / "all.csv"));

  // A missing shard and a duplicated shard are one-line errors with exit status 2.
  const CliRun missing = run_kvsim("sweep --merge " + path("s0.csv") + " " + path("s1.csv"));
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.out.find("kvsim: error: --merge: 4 of 12 configs missing (first: 2,5,8,11)"),
            std::string::npos)
      << missing.out;
  const CliRun dup = run_kvsim("sweep --merge " + path("s0.csv") + " " + path("s0.csv"));
  EXPECT_EQ(dup.status, 2);
  EXPECT_NE(dup.out.find("already given in"), std::string::npos) << dup.out;
  EXPECT_EQ(std::count(dup.out.begin(), dup.out.end(), '\n'), 1) << dup.out;
}

TEST_F(CliSweep, PrintsTableWithExpectation) {
  const CliRun r =
      run_kvsim("sweep " + path("trace.csv") +
                " --model qwen2.5-7b --gpu rtx4090 --max-model-len 4096 --block-sizes 1,256");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("2 of 2 configs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pad%exp"), std::string::npos) << r.out;
}

// With chunked prefill off, every grid point's default token budget is max(max_model_len,
// vLLM's default), as in `kvsim replay` (it used to fail validation at every point).
TEST_F(CliSweep, ChunkedPrefillOffUsesMaxModelLenBudget) {
  const CliRun r = run_kvsim("sweep " + path("trace.csv") +
                                 " --model qwen2.5-7b --gpu rtx4090 --max-model-len 4096"
                                 " --block-sizes 16,32 --no-enable-chunked-prefill --csv -",
                             "2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  std::istringstream csv(r.out);
  std::string line;
  std::getline(csv, line);
  ASSERT_EQ(line.find("max_num_seqs,max_num_batched_tokens,"), line.find("max_num_seqs,")) << line;
  int rows = 0;
  while (std::getline(csv, line)) {
    ++rows;
    EXPECT_NE(line.find(",bfloat16,256,4096,"), std::string::npos) << line;
  }
  EXPECT_EQ(rows, 2);
}

TEST_F(CliSweep, BadInputIsOneLineExitTwo) {
  const struct {
    std::string args;
    std::string needle;
  } cases[] = {
      {sweep("--shard 3/3"), "--shard '3/3': I must be in [0, N)"},
      {sweep("--shard x"), "--shard 'x': missing '/'"},
      {sweep("--block-sizes 16,16"), "--block-sizes: value 16 given twice"},
      {sweep("--gpu-memory-utilizations 0.9"), "both size the pool"},
      {"sweep " + path("trace.csv") + " --model qwen2.5-7b --step-time fixed:0",
       "--step-time 'fixed:0'"},
      {"sweep --model qwen2.5-7b", "a TRACE file is required"},
      {"sweep " + path("nope.csv") + " --model qwen2.5-7b", "nope.csv"},
      {"sweep --merge " + path("nope.csv"), "nope.csv: cannot open"},
  };
  for (const auto& c : cases) {
    const CliRun r = run_kvsim(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("kvsim: error: ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(c.needle), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  }
}

}  // namespace
}  // namespace kvsim_cli_test
