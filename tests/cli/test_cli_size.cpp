// `kvsim size` end to end on a small synthetic trace: JSON fields and ranking, the replay
// command reproducing a candidate, --jobs independence, --shard/--merge byte identity, the
// no-feasible exit status and bad input.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_grid_fixture.h"
#include "cli_run.h"

namespace kvsim_cli_test {
namespace {

namespace fs = std::filesystem;

class CliSize : public CliGridFixture {
 protected:
  // 150 requests, 20 ms apart (a burst one replica cannot serve within the SLO on every card).
  CliSize()
      : CliGridFixture({.seed = 7,
                        .requests = 150,
                        .gap_s = 0.02,
                        .in_lo = 200,
                        .in_hi = 3000,
                        .out_lo = 20,
                        .out_hi = 300}) {}
  // 2 cards x TP 1,2 x KV auto,fp8 = 8 candidates.
  std::string size(const std::string& extra) const {
    return cat({"size ", path("trace.csv"),
                " --model llama-3.1-8b --max-model-len 4096 --slo-ttft-p99 0.5"
                " --slo-tpot-p99 0.05 --gpus l40s,h100-80g --tp 1,2 --kv-cache-dtype auto,fp8"
                " --max-replicas 16 ",
                extra});
  }
};

TEST_F(CliSize, JsonIsRankedAndComplete) {
  const CliRun r = run_kvsim(size("--json " + path("s.json") + " --csv " + path("s.csv")));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("kvsim size: "), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(slurp(dir_ / "s.json"));
  EXPECT_EQ(j.at("num_candidates"), 8);
  EXPECT_EQ(j.at("model"), "llama-3.1-8b");
  EXPECT_EQ(j.at("slo").at("ttft_p99_s"), 0.5);
  const auto& c = j.at("candidates");
  ASSERT_EQ(c.size(), 8u);
  double last_cost = 0;
  bool seen_infeasible = false;
  for (const auto& x : c) {
    for (const char* key :
         {"gpu", "tp", "kv_cache_dtype", "block_size", "max_num_seqs", "replicas", "cost_per_hour",
          "feasible", "reason", "ttft_p99_s", "tpot_p99_s", "mean_running_per_replica",
          "formula_max_concurrency", "replay_command", "trials"}) {
      ASSERT_TRUE(x.contains(key)) << key;
    }
    if (x.at("feasible")) {
      EXPECT_FALSE(seen_infeasible);  // feasible first
      EXPECT_GE(x.at("cost_per_hour").get<double>(), last_cost);
      last_cost = x.at("cost_per_hour");
      EXPECT_LE(x.at("ttft_p99_s").get<double>(), 0.5);
      EXPECT_LE(x.at("tpot_p99_s").get<double>(), 0.05);
      EXPECT_EQ(x.at("reason"), "");
      EXPECT_GT(x.at("mean_running_per_replica").get<double>(), 0);
      const std::string cmd = x.at("replay_command");
      EXPECT_EQ(cmd.rfind("kvsim replay ", 0), 0u) << cmd;
      EXPECT_NE(cmd.find(" --replicas " + std::to_string(x.at("replicas").get<int>())),
                std::string::npos)
          << cmd;
    } else {
      seen_infeasible = true;
    }
  }
  ASSERT_TRUE(c[0].at("feasible")) << slurp(dir_ / "s.json");
  // The same candidate at one replica fewer fails (it was probed), or it is 1.
  const int n = c[0].at("replicas");
  bool below_failed = n == 1;
  for (const auto& t : c[0].at("trials")) {
    if (t.at("replicas") == n - 1) below_failed = !t.at("meets_slo").get<bool>();
  }
  EXPECT_TRUE(below_failed);
  const std::string csv = slurp(dir_ / "s.csv");
  EXPECT_EQ(csv.rfind("rank,candidate_index,gpu,tp,", 0), 0u);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 9);
}

TEST_F(CliSize, ReplayCommandReproducesTheCandidate) {
  ASSERT_EQ(run_kvsim(size("-q --json " + path("s.json"))).status, 0);
  const auto j = nlohmann::json::parse(slurp(dir_ / "s.json"));
  const auto& best = j.at("candidates")[0];
  ASSERT_TRUE(best.at("feasible"));
  std::string cmd = best.at("replay_command");
  const std::string prefix = "kvsim ";
  ASSERT_EQ(cmd.rfind(prefix, 0), 0u);
  cmd = cmd.substr(prefix.size()) + " --no-progress --json " + path("replay.json");
  const CliRun r = run_kvsim(cmd);
  ASSERT_EQ(r.status, 0) << cmd << "\n" << r.out;
  const auto rep = nlohmann::json::parse(slurp(dir_ / "replay.json"));
  EXPECT_EQ(rep.at("ttft_p99_s"), best.at("ttft_p99_s")) << cmd;
  EXPECT_EQ(rep.at("tpot_p99_s"), best.at("tpot_p99_s")) << cmd;
  EXPECT_EQ(rep.at("replicas"), best.at("replicas")) << cmd;
}

TEST_F(CliSize, JobsAndShardsGiveIdenticalFiles) {
  ASSERT_EQ(run_kvsim(size("-q --json " + path("a.json") + " --csv " + path("a.csv"))).status, 0);
  const CliRun j2 = run_kvsim(size("-q --jobs 2 --json " + path("b.json")));
  ASSERT_EQ(j2.status, 0) << j2.out;
  EXPECT_EQ(slurp(dir_ / "a.json"), slurp(dir_ / "b.json"));
  for (int i = 0; i < 3; ++i) {
    const CliRun s = run_kvsim(size(cat({"-q --shard ", std::to_string(i), "/3 --json ",
                                         path("shard" + std::to_string(i) + ".json")})));
    ASSERT_EQ(s.status, 0) << s.out;
  }
  const CliRun m =
      run_kvsim(cat({"size --merge ", path("shard2.json"), " ", path("shard0.json"), " ",
                     path("shard1.json"), " --json ", path("m.json"), " --csv ", path("m.csv")}));
  ASSERT_EQ(m.status, 0) << m.out;
  EXPECT_EQ(slurp(dir_ / "a.json"), slurp(dir_ / "m.json"));
  EXPECT_EQ(slurp(dir_ / "a.csv"), slurp(dir_ / "m.csv"));
  // A missing shard names the missing candidate.
  const CliRun miss =
      run_kvsim(cat({"size --merge ", path("shard0.json"), " ", path("shard1.json"), " -q"}));
  EXPECT_EQ(miss.status, 2);
  EXPECT_NE(miss.out.find("the shards hold 6 of 8 candidates (candidate 4 is missing"),
            std::string::npos)
      << miss.out;
  // A shard of another search (different SLO) is refused.
  ASSERT_EQ(run_kvsim(cat({"size ", path("trace.csv"),
                           " --model llama-3.1-8b --max-model-len 4096 --slo-ttft-p99 0.6"
                           " --slo-tpot-p99 0.05 --gpus l40s,h100-80g --tp 1,2"
                           " --kv-cache-dtype auto,fp8 --max-replicas 16 -q --shard 2/3 --json ",
                           path("other.json")}))
                .status,
            0);
  const CliRun foreign = run_kvsim(cat(
      {"size --merge ", path("shard0.json"), " ", path("shard1.json"), " ", path("other.json")}));
  EXPECT_EQ(foreign.status, 2);
  EXPECT_NE(foreign.out.find("a shard of a different search"), std::string::npos) << foreign.out;
}

TEST_F(CliSize, NothingFitsStillPrintsTheTableAndExits3) {
  const CliRun r = run_kvsim(cat({"size ", path("trace.csv"),
                                  " --model llama-3.1-70b --max-model-len 4096 --slo-ttft-p99 1"
                                  " --slo-tpot-p99 0.1 --gpus l40s,a100-40g --tp 1"}));
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_NE(r.out.find("infeasible:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("does not fit: model 'llama-3.1-70b' does not fit on 'l40s'"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("0 of 2 candidates feasible"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no candidate meets the SLO (exit status 3)"), std::string::npos);
}

TEST_F(CliSize, BadInputIsOneLineNamingTheFlag) {
  const std::string base = cat({"size ", path("trace.csv"), " --model llama-3.1-8b "});
  const std::string slo = " --slo-ttft-p99 1 --slo-tpot-p99 0.1 ";
  const std::string grid = " --gpus h100-80g --tp 1 ";
  struct Case {
    std::string args;
    std::string message;
  };
  const Case cases[] = {
      {base + grid + "--slo-ttft-p99 0 --slo-tpot-p99 0.1",
       "--slo-ttft-p99 0: must be a finite number of seconds > 0"},
      {base + grid + "--slo-ttft-p99 1 --slo-tpot-p99 -0.5", "--slo-tpot-p99 -0.5: must be"},
      {base + grid + slo + "--slo-e2e-p99 0", "--slo-e2e-p99 0: must be"},
      {base + grid + "--slo-ttft-p99 1", "size: --slo-tpot-p99 is required"},
      {base + grid + slo + "--gpu-price tpu=3", "--gpu-price 'tpu=3': unknown gpu 'tpu'"},
      {base + grid + slo + "--gpu-price h100-80g=0", "price '0' is not a number > 0"},
      {base + slo + "--gpus h100-80g --tp 0", "--tp: must be > 0, got 0"},
      {base + slo + "--gpus h100-80g --tp 1,,2", "--tp: item 2 of '1,,2' is empty"},
      {base + slo + "--gpus h100-80g", "--tp: at least one tensor-parallel size is required"},
      {base + slo + "--tp 1", "--gpus: at least one GPU is required"},
      {base + slo + "--gpus h100-80g,tpu --tp 1", "--gpus: unknown gpu 'tpu'"},
      {base + grid + slo + "--max-replicas 0", "--max-replicas: must be > 0, got 0"},
      {base + grid + slo + "--router nearest", "--router: "},
      {base + grid + slo + "--max-replicas 1025", "--max-replicas 1025: must be in [1, 1024]"},
      {base + grid + slo + "--shard 3/3", "--shard '3/3': I must be in [0, N)"},
      {cat({"size ", path("trace.csv"), grid, slo}), "size: a model is required"},
      {"size --merge " + path("trace.csv") + " --model llama-3.1-8b", "--merge takes only"},
  };
  for (const Case& c : cases) {
    const CliRun r = run_kvsim(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.args << "\n" << r.out;
  }
}

// Issue 23: a large grid announces its size and a time estimate before it runs; a small one
// does not; stderr that is not a terminal gets no redrawn bar.
TEST_F(CliSize, ALargeGridAnnouncesItselfWithAnEstimate) {
  const CliRun big = run_kvsim(size("-q --max-num-seqs 64,128"), "2>&1 >/dev/null");
  ASSERT_EQ(big.status, 0) << big.out;
  EXPECT_EQ(big.out.rfind("kvsim size: searching 16 candidates over 150 requests with 1 job; "
                          "estimated ~",
                          0),
            0u)
      << big.out;
  EXPECT_NE(big.out.find("(a rough guess: "), std::string::npos) << big.out;
  EXPECT_EQ(big.out.find('\r'), std::string::npos) << "a bar on a pipe";
  const CliRun small = run_kvsim(size("-q"), "2>&1 >/dev/null");
  ASSERT_EQ(small.status, 0) << small.out;
  EXPECT_EQ(small.out.find("searching"), std::string::npos) << small.out;
  // A shard counts only its own candidates (16 in 3 shards: at most 6 each, below the limit).
  const CliRun shard = run_kvsim(
      size("-q --max-num-seqs 64,128 --shard 0/3 --json " + path("s0.json")), "2>&1 >/dev/null");
  ASSERT_EQ(shard.status, 0) << shard.out;
  EXPECT_EQ(shard.out.find("searching"), std::string::npos) << shard.out;
}

// On a terminal (util-linux `script` gives the run a pty) the bar counts candidates done / total.
TEST_F(CliSize, OnATerminalABarCountsCandidates) {
  if (std::system("script --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no script(1)";
  const std::string cmd =
      cat({"'", KVSIM_BINARY, "' ", size("-q --max-num-seqs 64,128 --json " + path("t.json"))});
  std::ofstream(path("run.sh")) << cmd << "\n";
  const CliRun r =
      kvsim_cli_test::run_shell(cat({"script -qec 'sh ", path("run.sh"), "' /dev/null 2>&1"}));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("\r\033[Kkvsim size: [#"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("] 16/16 candidates, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("] 1/16 candidates, "), std::string::npos) << r.out;
}

// Every bad-input path of size and size --merge exits 2; 3 is only "no candidate meets the SLO".
TEST_F(CliSize, EveryBadInputExits2) {
  std::ofstream(path("bad.json")) << "{\"size_id\": 1";
  std::ofstream(path("empty.json")) << "";
  for (const std::string& args :
       {size("--max-replicas 100000"),
        size("--gpus nope"),
        size("--tp 0"),
        size("--tp 1,1"),
        size("--kv-cache-dtype fp9"),
        size("--block-sizes 0"),
        size("--gpu-price l40s=-1"),
        size("--gpu-price nope=1"),
        size("--shard 3/3"),
        size("--plot -"),
        size("--json " + path("x.json") + " --csv " + path("x.json")),
        size("--json " + path("trace.csv")),
        size("--jobs 0"),
        size("--slo-ttft-p99 0"),
        size("--router nope"),
        size("--json " + path("missing-dir/x.json")),
        cat({"size ", path("nope.csv"),
             " --model llama-3.1-8b --slo-ttft-p99 1 "
             "--slo-tpot-p99 1 --gpus l40s --tp 1"}),
        cat({"size ", path("trace.csv"), " --slo-ttft-p99 1 --slo-tpot-p99 1 --gpus l40s --tp 1"}),
        cat({"size ", path("trace.csv"),
             " --model llama-3.1-8b --slo-ttft-p99 1 --gpus l40s"
             " --tp 1"}),
        cat({"size --merge ", path("bad.json")}),
        cat({"size --merge ", path("empty.json")}),
        cat({"size --merge ", path("nope.json")}),
        cat({"size --merge ", path("bad.json"), " --tp 1"}),
        cat({"size --merge ", path("bad.json"), " --json ", path("bad.json")})}) {
    const CliRun r = run_kvsim(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("kvsim: error: "), std::string::npos) << args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace kvsim_cli_test
