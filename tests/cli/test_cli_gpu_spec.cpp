// End-to-end tests of the card flags: the newer GPU presets in --help and in a plan, and
// --gpu-spec FILE (a card from JSON): the round trip against a preset, and every refusal as the
// one line the user sees.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "../scratch_dir_test.h"
#include "cli_run.h"

namespace {

using kvsim_cli_test::cat;
using kvsim_cli_test::CliRun;
using kvsim_cli_test::run_kvsim;

// h100-80g's figures (core/src/gpu_presets.cpp), under its own name.
const char* const kH100Spec = R"({
  "name": "h100-80g",
  "vram_gib": 80,
  "peak_bf16_tflops": 989.4,
  "hbm_gb_per_s": 3350,
  "peak_fp8_tflops": 1978.9,
  "interconnect_gb_per_s": 900,
  "interconnect_latency_us": 37
}
)";

class CliGpuSpec : public kvsim_test::ScratchDirTest {
 protected:
  // Runs `plan <args> --gpu-spec FILE` with `json` as FILE; returns stderr (stdout is empty).
  CliRun refused(const std::string& json, const std::string& args = "--model qwen2.5-7b") {
    const std::string path = write("card.json", json);
    CliRun r = run_kvsim(cat({"plan ", args, " --gpu-spec '", path, "'"}), "2>&1 >/dev/null");
    EXPECT_EQ(r.status, 2) << r.out;
    return r;
  }
  std::string card() const { return (dir_ / "card.json").string(); }
};

TEST(CliGpuPresets, NewCardsAreListedInHelp) {
  const CliRun r = run_kvsim("plan --help");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* name :
       {"rtx-pro-6000", "rtx5090", "b200", "gb200", "h20", "l20", "mi325x", "mi355x"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  }
  EXPECT_NE(r.out.find("--gpu-spec"), std::string::npos) << r.out;
}

TEST(CliGpuPresets, SeventyBOnEightB200s) {
  const CliRun r = run_kvsim("plan --model llama-3.1-70b --gpu b200 --tp 8 --json", "2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("gpu"), "b200");
  EXPECT_EQ(j.at("vram_gib"), 180);
  EXPECT_EQ(j.at("tensor_parallel_size"), 8);
  EXPECT_GT(j.at("kv_budget_bytes").get<int64_t>(), 0);
  EXPECT_GT(j.at("num_gpu_blocks").get<int64_t>(), 0);
}

TEST_F(CliGpuSpec, FileEqualToAPresetPlansTheSame) {
  const std::string path = write("h100.json", kH100Spec);
  for (const char* extra : {"", " --json", " --tp 2 --kv-cache-dtype fp8 --concurrency 16"}) {
    const std::string base = cat({"plan --model llama-3.1-8b --max-model-len 8192", extra});
    const CliRun preset = run_kvsim(base + " --gpu h100-80g");
    const CliRun file = run_kvsim(cat({base, " --gpu-spec '", path, "'"}));
    ASSERT_EQ(preset.status, 0) << preset.out;
    EXPECT_EQ(file.status, 0);
    EXPECT_EQ(file.out, preset.out) << extra;
  }
  // memory_gb is the same figure as vram_gib.
  std::string alias = kH100Spec;
  alias.replace(alias.find("vram_gib"), 8, "memory_gb");
  const std::string alias_path = write("alias.json", alias);
  const std::string base = "plan --model llama-3.1-8b --json";
  EXPECT_EQ(run_kvsim(cat({base, " --gpu-spec '", alias_path, "'"})).out,
            run_kvsim(base + " --gpu h100-80g").out);
}

TEST_F(CliGpuSpec, ReplayWithTheRooflineMatchesThePreset) {
  const std::string path = write("h100.json", kH100Spec);
  const std::string trace = cat({"'", KVSIM_SOURCE_DIR, "/tests/data/traces/azure_head.csv.gz'"});
  const std::string base = cat({"replay ", trace,
                                " --model llama-3.1-8b --max-model-len 8192 --max-requests 40 "
                                "--step-time roofline --json - --no-progress"});
  const CliRun preset = run_kvsim(base + " --gpu h100-80g", "2>/dev/null");
  const CliRun file = run_kvsim(cat({base, " --gpu-spec '", path, "'"}), "2>/dev/null");
  ASSERT_EQ(preset.status, 0) << preset.out;
  ASSERT_EQ(file.status, 0) << file.out;
  nlohmann::json a = nlohmann::json::parse(preset.out);
  nlohmann::json b = nlohmann::json::parse(file.out);
  a.erase("wall_seconds");
  b.erase("wall_seconds");
  EXPECT_EQ(a, b);
}

TEST_F(CliGpuSpec, BadFilesAreRefusedNamingFileLineAndKey) {
  std::string r = refused(R"({"name": "x", "vram_gib": 80, "peak_bf16_tflops": 100})").out;
  EXPECT_EQ(r, cat({"kvsim: error: ", card(), ": key 'hbm_gb_per_s': missing (required)\n"}));

  r = refused(
          "{\"name\": \"x\",\n \"vram_gib\": 80,\n \"peak_bf16_tflops\": 100,\n"
          " \"hbm_gb_per_s\": -1}")
          .out;
  EXPECT_EQ(r, cat({"kvsim: error: ", card(),
                    ":4: key 'hbm_gb_per_s': expected a finite number > 0, got -1\n"}));

  r = refused(
          "{\"name\": \"x\", \"vram_gib\": 80, \"peak_bf16_tflops\": 100,\n"
          " \"hbm_gb_per_s\": 1000, \"tdp_watts\": 700}")
          .out;
  EXPECT_EQ(r, cat({"kvsim: error: ", card(),
                    ":2: key 'tdp_watts': unknown key (expected name, vram_gib or memory_gb, "
                    "peak_bf16_tflops, hbm_gb_per_s, peak_fp8_tflops, interconnect_gb_per_s, "
                    "interconnect_latency_us)\n"}));

  r = refused("name: x\n").out;
  EXPECT_EQ(r.rfind(cat({"kvsim: error: ", card(), ":1: malformed JSON: "}), 0), 0U) << r;

  r = refused(R"({"name": "x", "vram_gib": 80, "peak_bf16_tflops": "fast", "hbm_gb_per_s": 9})")
          .out;
  EXPECT_EQ(r, cat({"kvsim: error: ", card(),
                    ":1: key 'peak_bf16_tflops': expected a finite number > 0, got \"fast\"\n"}));

  r = refused(R"({"name": "x", "vram_gib": 80, "memory_gb": 80, "peak_bf16_tflops": 1,)"
              R"( "hbm_gb_per_s": 9})")
          .out;
  EXPECT_EQ(r, cat({"kvsim: error: ", card(),
                    ":1: key 'memory_gb': give vram_gib or memory_gb, not both\n"}));

  r = refused(R"({"vram_gib": 80, "peak_bf16_tflops": 1, "hbm_gb_per_s": 9})").out;
  EXPECT_EQ(r, cat({"kvsim: error: ", card(), ": key 'name': missing (required)\n"}));

  r = refused(R"([80])").out;
  EXPECT_EQ(r, cat({"kvsim: error: ", card(),
                    ": expected a JSON object with the keys name, vram_gib or memory_gb, "
                    "peak_bf16_tflops, hbm_gb_per_s, peak_fp8_tflops, interconnect_gb_per_s, "
                    "interconnect_latency_us, got an array\n"}));
}

TEST_F(CliGpuSpec, ExclusiveWithGpuAndVramGib) {
  EXPECT_EQ(refused(kH100Spec, "--model qwen2.5-7b --gpu l4").out,
            "kvsim: error: give either --gpu-spec or --gpu, not both\n");
  EXPECT_EQ(refused(kH100Spec, "--model qwen2.5-7b --vram-gib 24").out,
            "kvsim: error: give either --gpu-spec or --vram-gib, not both\n");
  const CliRun r = run_kvsim(cat({"plan --model qwen2.5-7b --gpu-spec '", dir_.string(), "'"}));
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out,
            cat({"kvsim: error: ", dir_.string(), ": is a directory, not a GPU spec JSON file\n"}));
}

}  // namespace
