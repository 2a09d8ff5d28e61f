// `kvsim replay` end to end through the binary: report, JSON keys, CSVs, determinism, errors.
#include <gtest/gtest.h>

#include "cli_run.h"

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

using kvsim_cli_test::CliRun;
using kvsim_cli_test::run_kvsim;
using kvsim_cli_test::slurp;

std::string replay_trace(const std::string& name) {
  const std::string a = std::string(KVSIM_SOURCE_DIR) + "/traces/" + name;
  return std::filesystem::exists(a) ? a : "/work/shared/traces/" + name;
}

std::string replay_tmp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("kvsim_cli_replay_" + name)).string();
}

TEST(CliReplay, JsonSummaryHasTheReliedOnKeys) {
  const CliRun r = run_kvsim("replay " + replay_trace("AzureLLMInferenceTrace_conv.csv") +
                             " --max-requests 300 --step-time fixed:20 --json - --no-progress");
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string json = r.out.substr(0, r.out.rfind("}\n") + 2);
  const nlohmann::json j = nlohmann::json::parse(json);
  for (const char* key : {"requests",
                          "finished",
                          "rejected",
                          "steps",
                          "sim_seconds",
                          "wall_seconds",
                          "num_gpu_blocks",
                          "block_size",
                          "peak_running",
                          "mean_running",
                          "formula_max_concurrency",
                          "vllm_max_concurrency",
                          "preemptions",
                          "recomputed_tokens",
                          "padding_tokens_mean",
                          "padding_fraction_mean",
                          "peak_kv_usage",
                          "prefix_cache_hit_rate",
                          "ttft_p50_s",
                          "ttft_p99_s",
                          "tpot_p50_s"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["requests"], 300);
  EXPECT_EQ(j["finished"].get<int>() + j["rejected"].get<int>(), 300);
  EXPECT_EQ(j["block_size"], 16);
  EXPECT_GT(j["peak_running"].get<int>(), 0);
  EXPECT_GE(j["peak_running"].get<double>(), j["mean_running"].get<double>());
  EXPECT_GT(j["ttft_p99_s"].get<double>(), 0.0);
  // 20 ms per step: the simulated time is a multiple of it plus idle gaps, and TTFT >= 20 ms.
  EXPECT_GE(j["ttft_p50_s"].get<double>(), 0.02);
  // With a default (unnamed) model max_model_len = 1 + longest input + output of the subset.
  EXPECT_GT(j["max_model_len"].get<int>(), 1);
}

TEST(CliReplay, HumanReportAndCsvsAreDeterministic) {
  const std::string args = "replay " + replay_trace("splitwise_conv.csv") +
                           " --max-requests 400 --num-gpu-blocks-override 2000 --no-progress";
  const CliRun a = run_kvsim(args + " --timeline " + replay_tmp("a.csv") + " --requests " +
                             replay_tmp("ra.csv"));
  const CliRun b = run_kvsim(args + " --timeline " + replay_tmp("b.csv") + " --requests " +
                             replay_tmp("rb.csv"));
  ASSERT_EQ(a.status, 0) << a.out;
  ASSERT_EQ(b.status, 0) << b.out;
  // Everything but the stderr wall-time line is byte-identical.
  auto strip = [](const std::string& s) { return s.substr(0, s.rfind("kvsim replay: ")); };
  EXPECT_EQ(strip(a.out), strip(b.out));
  EXPECT_NE(a.out.find("Concurrency: formula vs observed"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("Maximum concurrency for"), std::string::npos);
  EXPECT_NE(a.out.find("binding limit"), std::string::npos);
  EXPECT_NE(a.out.find("(overridden)"), std::string::npos);
  const std::string ta = slurp(replay_tmp("a.csv"));
  EXPECT_EQ(ta, slurp(replay_tmp("b.csv")));
  EXPECT_EQ(slurp(replay_tmp("ra.csv")), slurp(replay_tmp("rb.csv")));
  EXPECT_EQ(ta.rfind("step,time_s,duration_s,running,waiting,", 0), 0u);
  const std::string ra = slurp(replay_tmp("ra.csv"));
  // Header + 400 request rows.
  EXPECT_EQ(std::count(ra.begin(), ra.end(), '\n'), 401);
}

// Async scheduling is the default (as in vLLM 0.26); --no-async-scheduling runs the sync loop;
// the JSON and the report say which ran; an explicit --async-scheduling refuses swap, while swap
// alone runs sync (vLLM turns async off by default for an incompatible option).
TEST(CliReplay, SchedulingModeFlags) {
  const std::string base = "replay " + replay_trace("AzureLLMInferenceTrace_conv.csv") +
                           " --max-requests 200 --step-time fixed:20 --no-progress --json - ";
  auto mode_of = [](const CliRun& r) {
    return nlohmann::json::parse(r.out.substr(0, r.out.rfind("}\n") + 2)).at("async_scheduling");
  };
  const CliRun def = run_kvsim(base);
  ASSERT_EQ(def.status, 0) << def.out;
  EXPECT_EQ(mode_of(def), true);
  const CliRun sync = run_kvsim(base + "--no-async-scheduling");
  ASSERT_EQ(sync.status, 0) << sync.out;
  EXPECT_EQ(mode_of(sync), false);
  const CliRun swap = run_kvsim(base + "--preemption-mode swap");
  ASSERT_EQ(swap.status, 0) << swap.out;
  EXPECT_EQ(mode_of(swap), false);
  const CliRun both = run_kvsim(base + "--async-scheduling --preemption-mode swap");
  EXPECT_EQ(both.status, 2);
  EXPECT_EQ(both.out.rfind("kvsim: error: --async-scheduling cannot run with --preemption-mode "
                           "swap",
                           0),
            0u)
      << both.out;
  const CliRun clash = run_kvsim(base + "--async-scheduling --no-async-scheduling");
  EXPECT_EQ(clash.status, 2) << clash.out;
  const CliRun report = run_kvsim("replay " + replay_trace("AzureLLMInferenceTrace_conv.csv") +
                                  " --max-requests 200 --step-time fixed:20 --no-progress");
  EXPECT_NE(report.out.find("async (vLLM's default) scheduling"), std::string::npos);
  EXPECT_NE(report.out.find("async scheduling: "), std::string::npos);
}

TEST(CliReplay, BadInputIsOneLineAndExit2) {
  const CliRun missing = run_kvsim("replay /nonexistent/trace.csv --no-progress");
  EXPECT_EQ(missing.status, 2);
  EXPECT_EQ(missing.out.rfind("kvsim: error: ", 0), 0u) << missing.out;
  EXPECT_EQ(std::count(missing.out.begin(), missing.out.end(), '\n'), 1) << missing.out;
  const CliRun mode = run_kvsim("replay " + replay_trace("splitwise_conv.csv") +
                                " --preemption-mode swapp --no-progress");
  EXPECT_EQ(mode.status, 2);
  EXPECT_EQ(mode.out.rfind("kvsim: error: --preemption-mode", 0), 0u) << mode.out;
  EXPECT_EQ(std::count(mode.out.begin(), mode.out.end(), '\n'), 1) << mode.out;
  for (const char* bad : {"--swap-bandwidth-gbps 0", "--swap-bandwidth-gbps nan",
                          "--swap-space-gib -1", "--swap-space-gib inf"}) {
    const CliRun r = run_kvsim("replay " + replay_trace("splitwise_conv.csv") +
                               " --preemption-mode swap --no-progress " + bad);
    EXPECT_EQ(r.status, 2) << bad;
    const std::string flag = std::string(bad).substr(0, std::string(bad).find(' '));
    EXPECT_EQ(r.out.rfind("kvsim: error: " + flag, 0), 0u) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  }
  const CliRun wm = run_kvsim("replay " + replay_trace("splitwise_conv.csv") + " --watermark 1.5");
  EXPECT_EQ(wm.status, 2);
  EXPECT_NE(wm.out.find("watermark"), std::string::npos) << wm.out;
}

TEST(CliReplay, TinyPoolRejectsWithReasons) {
  // 64 blocks of 16: prompts above 63 blocks are rejected at arrival, counted by reason. (A
  // max_model_len request needs all 64 blocks: vLLM 0.26 starts, 0.33 refuses to.)
  const CliRun r = run_kvsim("replay " + replay_trace("AzureLLMInferenceTrace_code.csv") +
                             " --max-requests 200 --num-gpu-blocks-override 64 --max-model-len 1024"
                             " --step-time fixed:5 --json - --no-progress --vllm-version 0.26");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out.substr(0, r.out.rfind("}\n") + 2));
  EXPECT_GT(j["rejected"].get<int>(), 0);
  const auto& by = j["rejected_by_reason"];
  EXPECT_EQ(j["rejected"].get<int>(),
            by["prompt_ge_max_model_len"].get<int>() + by["prompt_exceeds_kv_pool"].get<int>() +
                by["never_admittable"].get<int>() + by["outgrew_kv_pool"].get<int>() +
                by["empty_prompt"].get<int>());
  EXPECT_EQ(j["finished"].get<int>() + j["rejected"].get<int>(), 200);
}

// A memory-starved replay (24 requests at t = 0 on 300 blocks) on a tiny model shape (2 layers,
// 1 KV head of 16: 2048 B per block of 16 bf16 tokens) through the host twin.
std::string swap_args(const std::string& mode, const std::string& gib,
                      const std::string& json = "-") {
  return "replay " + replay_trace("splitwise_conv.csv") +
         " --max-requests 24 --arrival all-at-once --num-gpu-blocks-override 300 --num-layers 2 "
         "--num-kv-heads 1"
         " --head-dim 16 --weights-gib 1 --step-time fixed:10 --backend host --no-progress"
         " --json " +
         json + " --preemption-mode " + mode + (mode == "swap" ? " --swap-space-gib " + gib : "");
}

std::string fmt_line(const nlohmann::json& j) {
  return "; swap: " + std::to_string(j["swap_outs"].get<int64_t>()) + " swapped out (" +
         std::to_string(j["swap_out_blocks"].get<int64_t>()) + " blocks, ";
}

nlohmann::json json_of(const CliRun& r) {
  return nlohmann::json::parse(r.out.substr(0, r.out.rfind("}\n") + 2));
}

// The swapped KV survives the trip to host and back into other device blocks: the host twin
// really executes every swap and verify() checks every slot of the pool at the end.
TEST(CliReplay, SwapModeOnTheHostBackendVerifies) {
  const CliRun swap = run_kvsim(swap_args("swap", "0.001"));
  ASSERT_EQ(swap.status, 0) << swap.out;
  const nlohmann::json s = json_of(swap);
  const CliRun rec = run_kvsim(swap_args("recompute", "0.001"));
  ASSERT_EQ(rec.status, 0) << rec.out;
  const nlohmann::json r = json_of(rec);

  EXPECT_EQ(s["preemption_mode"], "swap");
  EXPECT_EQ(s["swap_bytes_per_block"], 2 * 16 * 2 * 16 * 2);  // layers*bs*(K+V)*head_dim*bf16
  EXPECT_EQ(s["host_swap_slots"], (1 << 30) / 1000 / 2048);   // floor(0.001 GiB / 2048 B)
  EXPECT_EQ(s["finished"], 24);
  EXPECT_EQ(r["finished"], 24);
  EXPECT_GT(r["recomputed_tokens"].get<int64_t>(), 0);
  EXPECT_GT(s["preemptions"].get<int>(), 0);
  EXPECT_EQ(s["recomputed_tokens"], 0);
  EXPECT_EQ(s["swap_fallbacks"], 0);
  EXPECT_EQ(s["swap_outs"], s["preemptions"]);
  EXPECT_EQ(s["swap_ins"], s["swap_outs"]);
  EXPECT_GT(s["swap_in_blocks"].get<int64_t>(), 0);
  EXPECT_EQ(s["swap_in_bytes"].get<int64_t>(), s["swap_in_blocks"].get<int64_t>() * 2048);
  EXPECT_EQ(s["backend"], "host");
  EXPECT_EQ(s["backend_verification_ok"], true) << s["backend_verification"];
  EXPECT_EQ(r["backend_verification_ok"], true);
  EXPECT_EQ(r["swap_outs"], 0);
}

// --backend-max-layers: the backend's bytes cover only the kept layers, and the JSON and the
// report say so.
TEST(CliReplay, BackendLayerCapIsReported) {
  const CliRun all = run_kvsim(swap_args("recompute", ""));
  ASSERT_EQ(all.status, 0) << all.out;
  const nlohmann::json a = json_of(all);
  EXPECT_EQ(a["num_layers"], 2);
  EXPECT_EQ(a["backend_layers"], 2);
  const std::string report_file = replay_tmp("layers_report.json");
  const CliRun one = run_kvsim(swap_args("recompute", "", report_file) + " --backend-max-layers 1");
  ASSERT_EQ(one.status, 0) << one.out;
  const nlohmann::json o = nlohmann::json::parse(slurp(report_file));
  EXPECT_EQ(o["num_layers"], 2);
  EXPECT_EQ(o["backend_layers"], 1);
  EXPECT_EQ(o["backend_bytes_written"].get<int64_t>() * 2,
            a["backend_bytes_written"].get<int64_t>());
  EXPECT_NE(one.out.find("backend host (1 of 2 layers; bytes and time cover those only)"),
            std::string::npos)
      << one.out;
}

TEST(CliReplay, SwapSpaceExhaustionFallsBackAndTimelineHasSwapColumns) {
  // 0.00005 GiB = 26 slots of 2048 B: too few for one of the victims.
  const std::string tl = replay_tmp("swap_timeline.csv");
  const std::string js = replay_tmp("swap_summary.json");
  const CliRun c = run_kvsim(swap_args("swap", "0.00005", js) + " --timeline " + tl);
  ASSERT_EQ(c.status, 0) << c.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(js));
  // The human report's preemption line carries the swap counts.
  EXPECT_NE(c.out.find(fmt_line(j)), std::string::npos) << c.out;
  EXPECT_EQ(j["host_swap_slots"], 26);
  EXPECT_GT(j["swap_fallbacks"].get<int>(), 0);
  EXPECT_GT(j["recomputed_tokens"].get<int64_t>(), 0);
  EXPECT_GT(j["swap_outs"].get<int>(), 0);
  EXPECT_LE(j["peak_host_swap_slots_used"].get<int>(), 26);
  EXPECT_EQ(j["swap_outs"].get<int>() + j["swap_fallbacks"].get<int>(), j["preemptions"]);
  EXPECT_EQ(j["backend_verification_ok"], true);
  const std::string csv = slurp(tl);
  const std::string header = csv.substr(0, csv.find('\n'));
  EXPECT_NE(header.find(",swap_out_blocks,swap_in_blocks,host_slots_used"), std::string::npos)
      << header;
}

}  // namespace
