// `kvsim replay --backend host` on a hybrid model: the KV pool in vLLM's hybrid layout (tensors
// shared by the full-attention and sliding-window groups) takes every step's per-group slot
// mappings and tables, and verify() passes over every slot at the end (docs/cuda-backend.md).
#include <gtest/gtest.h>

#include "cli_run.h"

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace {

using kvsim_cli_test::CliRun;
using kvsim_cli_test::run_kvsim;

std::string hybrid_trace(const std::string& name) {
  const std::string a = std::string(KVSIM_SOURCE_DIR) + "/traces/" + name;
  return std::filesystem::exists(a) ? a : "/work/shared/traces/" + name;
}

nlohmann::json replay_json(const std::string& args) {
  const CliRun r = run_kvsim(
      "replay " + hybrid_trace("BurstGPT_1.head400.csv") + " " + args + " --json - --no-progress",
      "2>/dev/null");
  EXPECT_EQ(r.status, 0) << r.out;
  return nlohmann::json::parse(r.out.substr(0, r.out.rfind("}\n") + 2));
}

TEST(CliHybridBackend, GptOssReplayOnTheHostTwinVerifiesEverySlot) {
  // 16 requests at once on 512 blocks: window blocks are dropped and reused by the full group.
  const std::string common =
      "--model gpt-oss-20b --gpu h100-80g --max-model-len 2048 --max-requests 16 "
      "--arrival all-at-once --num-gpu-blocks-override 512 --step-time fixed:10";
  const nlohmann::json host = replay_json(common + " --backend host --backend-max-layers 1");
  EXPECT_EQ(host["backend"], "host");
  EXPECT_EQ(host["backend_verification_ok"], true) << host["backend_verification"];
  EXPECT_EQ(host["backend_slots_checked"], 512 * 16);
  // One tensor kept, shared by one layer of each of the two groups.
  EXPECT_EQ(host["backend_layers"], 2);
  EXPECT_EQ(host["num_layers"], 24);
  EXPECT_GT(host["window_blocks_freed"].get<int64_t>(), 0);
  EXPECT_GT(host["backend_bytes_written"].get<int64_t>(), 0);
  // The backend changes nothing the scheduler decides.
  const nlohmann::json null = replay_json(common);
  for (const char* key : {"steps", "preemptions", "window_blocks_freed", "peak_running",
                          "sim_seconds", "peak_kv_usage"}) {
    EXPECT_EQ(host[key], null[key]) << key;
  }
}

}  // namespace
