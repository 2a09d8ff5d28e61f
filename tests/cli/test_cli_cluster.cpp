// `kvsim replay --replicas N --router P ...` end to end: JSON keys, per-replica report, CSVs with a
// replica column, --replicas 1 equals the plain replay, SLO lines, bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_run.h"

namespace {

using kvsim_cli_test::CliRun;
using kvsim_cli_test::run_kvsim;
using kvsim_cli_test::slurp;

std::string cluster_trace(const std::string& name) {
  const std::string a = std::string(KVSIM_SOURCE_DIR) + "/traces/" + name;
  return std::filesystem::exists(a) ? a : "/work/shared/traces/" + name;
}

std::string cluster_tmp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("kvsim_cli_cluster_" + name)).string();
}

const std::string kBase = " --max-requests 200 --step-time fixed:20 --no-progress";

TEST(CliCluster, JsonExtendsTheSingleReplicaKeys) {
  const CliRun r =
      run_kvsim("replay " + cluster_trace("conversation_trace.jsonl") + kBase +
                    " --gpu h100-80g --replicas 3 --router kv-aware --slo-ttft-p99 2 --json -",
                "2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* key :
       {"requests", "finished", "steps", "mean_running", "ttft_p99_s", "prefix_cache_hit_rate",
        "replicas", "router", "per_replica", "admission_rejected", "slo", "wall_seconds"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["replicas"], 3);
  EXPECT_EQ(j["router"], "kv-aware");
  ASSERT_EQ(j["per_replica"].size(), 3U);
  int64_t requests = 0;
  for (const auto& rep : j["per_replica"]) {
    EXPECT_TRUE(rep.contains("mean_running"));
    EXPECT_TRUE(rep.contains("ttft_p99_s"));
    EXPECT_FALSE(rep.contains("trace"));
    requests += rep["requests"].get<int64_t>();
  }
  EXPECT_EQ(requests, 200);
  EXPECT_EQ(j["requests"], 200);
  EXPECT_TRUE(j["slo"].contains("attainment"));
  EXPECT_TRUE(j["slo"].contains("goodput_rps"));
  EXPECT_EQ(j["slo"]["ttft_p99_s"], 2.0);
  const nlohmann::ordered_json o = nlohmann::ordered_json::parse(r.out);
  EXPECT_EQ(o.items().begin().key(), "trace");
  EXPECT_EQ((--o.end()).key(), "wall_seconds");
}

TEST(CliCluster, ReportTableAndCsvColumns) {
  const std::string args = "replay " + cluster_trace("AzureLLMInferenceTrace_conv.csv") + kBase +
                           " --replicas 2 --router least-outstanding --slo-ttft-p99 1 "
                           "--slo-tpot-p99 0.2 --timeline " +
                           cluster_tmp("tl.csv") + " --requests " + cluster_tmp("rq.csv");
  const CliRun a = run_kvsim(args, "2>/dev/null");
  ASSERT_EQ(a.status, 0) << a.out;
  EXPECT_NE(a.out.find("Cluster: 2 replicas, router least-outstanding"), std::string::npos)
      << a.out;
  EXPECT_NE(a.out.find("ttft99"), std::string::npos);
  EXPECT_NE(a.out.find("SLO: TTFT p99 <= 1 s, TPOT p99 <= 0.2 s"), std::string::npos);
  EXPECT_NE(a.out.find("goodput"), std::string::npos);
  const std::string tl = slurp(cluster_tmp("tl.csv"));
  const std::string rq = slurp(cluster_tmp("rq.csv"));
  EXPECT_EQ(tl.rfind("replica,step,time_s,", 0), 0U);
  EXPECT_EQ(rq.rfind("replica,request_id,", 0), 0U);
  EXPECT_EQ(std::count(rq.begin(), rq.end(), '\n'), 201);
  EXPECT_NE(tl.find("\n1,"), std::string::npos) << "rows of replica 1";
  // Deterministic: the same bytes again.
  const CliRun b = run_kvsim(args, "2>/dev/null");
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(tl, slurp(cluster_tmp("tl.csv")));
  EXPECT_EQ(rq, slurp(cluster_tmp("rq.csv")));
}

TEST(CliCluster, OneReplicaKeepsThePlainReplayBytes) {
  const std::string base =
      "replay " + cluster_trace("conversation_trace.jsonl") + kBase + " --gpu h100-80g";
  const CliRun plain = run_kvsim(base + " --timeline " + cluster_tmp("p_tl.csv") + " --requests " +
                                 cluster_tmp("p_rq.csv") + " --json " + cluster_tmp("p.json"));
  const CliRun one = run_kvsim(base + " --replicas 1 --router prefix-affinity --timeline " +
                               cluster_tmp("o_tl.csv") + " --requests " + cluster_tmp("o_rq.csv") +
                               " --json " + cluster_tmp("o.json"));
  ASSERT_EQ(plain.status, 0) << plain.out;
  ASSERT_EQ(one.status, 0) << one.out;
  EXPECT_EQ(slurp(cluster_tmp("p_tl.csv")), slurp(cluster_tmp("o_tl.csv")));
  EXPECT_EQ(slurp(cluster_tmp("p_rq.csv")), slurp(cluster_tmp("o_rq.csv")));
  // The cluster JSON adds keys; the single-replica ones keep their values.
  const nlohmann::json p = nlohmann::json::parse(slurp(cluster_tmp("p.json")));
  const nlohmann::json o = nlohmann::json::parse(slurp(cluster_tmp("o.json")));
  for (const auto& [key, value] : p.items()) {
    if (key == "wall_seconds") continue;
    EXPECT_EQ(o[key], value) << key;
  }
  EXPECT_EQ(o["replicas"], 1);
}

TEST(CliCluster, AdmissionRejectionsAreReported) {
  const CliRun r =
      run_kvsim("replay " + cluster_trace("AzureLLMInferenceTrace_conv.csv") + kBase +
                    " --replicas 2 --max-num-seqs 2 --admission-max-waiting-requests 1 --json -",
                "2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["admission_rejected"].get<int64_t>(), 0);
  EXPECT_EQ(j["admission_rejected"], j["admission_rejected_by_reason"]["admission_queue_full"]);
  EXPECT_GE(j["rejected"].get<int64_t>(), j["admission_rejected"].get<int64_t>());
}

TEST(CliCluster, BadInputIsOneLineNamingTheFlag) {
  const std::string base = "replay " + cluster_trace("AzureLLMInferenceTrace_conv.csv") + kBase;
  struct Case {
    const char* flags;
    const char* expect;
  };
  const Case cases[] = {
      {" --replicas 0", "--replicas 0: must be in [1, 1024]"},
      {" --router least-loaded", "--router: unknown router 'least-loaded' (valid: round-robin,"},
      {" --router-staleness-ms -5", "--router-staleness-ms -5: must be"},
      {" --slo-ttft-p99 0", "--slo-ttft-p99 0: must be a finite number of seconds > 0"},
      {" --slo-tpot-p99 -1", "--slo-tpot-p99 -1:"},
      {" --affinity-load-factor 0.5", "--affinity-load-factor 0.5: must be >= 1"},
      {" --slo-stop-early", "--slo-stop-early needs an objective"},
      {" --replicas 2 --backend host", "--backend host: a cluster replay (--replicas 2)"},
  };
  for (const Case& c : cases) {
    const CliRun r = run_kvsim(base + c.flags);
    EXPECT_EQ(r.status, 2) << c.flags << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.flags << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.flags << "\n" << r.out;
  }
}

}  // namespace
