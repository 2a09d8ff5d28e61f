// End-to-end tests of `kvsim plan`: runs the built binary (KVSIM_BINARY) and checks its output
// and exit status: the lesson's example, vLLM's log lines, --json keys and every error path.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include "cli_run.h"

#include <array>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace {

using kvsim_cli_test::CliRun;
using kvsim_cli_test::run_kvsim;

const char* const kStdoutOnly = "2>/dev/null";  // most checks read stdout alone

std::string data(const std::string& name) {
  return std::string("'") + KVSIM_SOURCE_DIR + "/tests/data/" + name + "'";
}

size_t count_lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n' ? 1 : 0;
  return n;
}

const std::string kPlanLesson =
    "plan --model qwen2.5-7b --vram-gib 24 --gpu-memory-utilization 0.90 --overhead-gib 1.6 "
    "--max-model-len 8192";
const std::string kSpec63 =
    "plan --num-layers 32 --num-kv-heads 8 --head-dim 128 --vram-gib 60 "
    "--gpu-memory-utilization 1 --overhead-gib 0 --weights-gib 0";

nlohmann::json plan_json(const std::string& args) {
  const CliRun r = run_kvsim(args + " --json", kStdoutOnly);
  EXPECT_EQ(r.status, 0) << args;
  return nlohmann::json::parse(r.out);
}

TEST(CliPlan, LessonTableHumanOutput) {
  CliRun r = run_kvsim(kPlanLesson, kStdoutOnly);
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("13 concurrent sequences of 8,192 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("57,344 B/token"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("5.82 GiB"), std::string::npos) << r.out;
  // vLLM 0.33 (the default): one start-up line.
  EXPECT_NE(r.out.find("\nGPU KV cache size: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" tokens, Maximum concurrency for 8,192 tokens per request: "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("vLLM 0.33.0 block arithmetic"), std::string::npos) << r.out;
  r = run_kvsim(kPlanLesson + " --weights-gib 5.5", kStdoutOnly);
  EXPECT_NE(r.out.find("33 concurrent sequences"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("14.50 GiB"), std::string::npos) << r.out;
  r = run_kvsim(kPlanLesson + " --weights-gib 5.5 --kv-cache-dtype fp8 --concurrency 64",
                kStdoutOnly);
  EXPECT_NE(r.out.find("66 concurrent sequences"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("8,484 tokens each for 64 concurrent sequences"), std::string::npos)
      << r.out;
}

TEST(CliPlan, LessonTableJson) {
  EXPECT_EQ(plan_json(kPlanLesson)["max_concurrency"], 13);
  EXPECT_EQ(plan_json(kPlanLesson + " --weights-gib 5.5")["max_concurrency"], 33);
  const auto j =
      plan_json(kPlanLesson + " --weights-gib 5.5 --kv-cache-dtype fp8 --concurrency 64");
  EXPECT_EQ(j["max_concurrency"], 66);
  EXPECT_EQ(j["max_context_tokens"], 8484);
  EXPECT_EQ(j["kappa_bytes"], 28672);
}

TEST(CliPlan, JsonHasTheDocumentedKeys) {
  const auto j = plan_json(kPlanLesson + " --concurrency 8");
  for (const char* key :
       {"kappa_bytes", "kv_budget_bytes", "kv_budget_gib", "kv_per_seq_bytes", "max_concurrency",
        "max_context_tokens", "num_gpu_blocks", "gpu_kv_cache_tokens", "vllm_max_concurrency",
        "model", "gpu", "page_size_bytes", "block_size", "max_model_len", "weights_bytes",
        "full_length_request_unservable", "notes", "warnings"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_TRUE(j["kappa_bytes"].is_number_integer());
  EXPECT_TRUE(j["max_concurrency"].is_number_integer());
  EXPECT_TRUE(j["vllm_max_concurrency"].is_number_float());
  EXPECT_EQ(j["kv_per_seq_bytes"], 57344LL * 8192);
  // Without --concurrency the inverse answer is absent.
  EXPECT_FALSE(plan_json(kPlanLesson).contains("max_context_tokens"));
}

TEST(CliPlan, Spec63VllmLinesExactly) {
  // vLLM 0.26: two lines.
  CliRun r = run_kvsim(kSpec63 + " --max-model-len 131072 --vllm-version 0.26", kStdoutOnly);
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("\nGPU KV cache size: 491,520 tokens\n"
                       "Maximum concurrency for 131,072 tokens per request: 3.75x\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("vLLM 0.26.0 block arithmetic"), std::string::npos) << r.out;
  // vLLM 0.33 (the default): the same numbers on one line.
  r = run_kvsim(kSpec63 + " --max-model-len 131072", kStdoutOnly);
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("\nGPU KV cache size: 491,520 tokens, Maximum concurrency for 131,072 "
                       "tokens per request: 3.75x\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("\nMaximum concurrency"), std::string::npos) << r.out;
  const auto j = plan_json(kSpec63 + " --max-model-len 131072");
  EXPECT_EQ(j["vllm_version"], "0.33");
  EXPECT_EQ(j["num_gpu_blocks"], 30720);
  EXPECT_EQ(j["gpu_kv_cache_tokens"], 491520);
  EXPECT_DOUBLE_EQ(j["vllm_max_concurrency"].get<double>(), 3.75);
  EXPECT_EQ(j["vllm_log_lines"], nlohmann::json::array({"GPU KV cache size: 491,520 tokens, "
                                                        "Maximum concurrency for 131,072 tokens "
                                                        "per request: 3.75x"}));
  const auto j26 = plan_json(kSpec63 + " --max-model-len 131072 --vllm-version 0.26.0");
  EXPECT_EQ(j26["vllm_version"], "0.26");
  EXPECT_EQ(j26["vllm_log_lines"].size(), 2u);
}

// vLLM 0.26 starts when one request needs every block (and never admits it): a warning and a
// flag. 0.33 holds the null block back in its start-up check: the same plan is an error.
TEST(CliPlan, OffByOneIsAWarningAndAFlag) {
  const std::string args =
      kSpec63 + " --max-model-len 8192 --num-gpu-blocks-override 512 --vllm-version 0.26";
  const CliRun r = run_kvsim(args, kStdoutOnly);
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("\nwarning: a request of max_model_len 8192 needs 512 blocks"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(plan_json(args)["full_length_request_unservable"].get<bool>());
  EXPECT_FALSE(plan_json(kSpec63 + " --max-model-len 8176 --num-gpu-blocks-override 512 "
                                   "--vllm-version 0.26")["full_length_request_unservable"]
                   .get<bool>());
  const CliRun r33 = run_kvsim(kSpec63 + " --max-model-len 8192 --num-gpu-blocks-override 512");
  EXPECT_EQ(r33.status, 2) << r33.out;
  EXPECT_NE(r33.out.find("needs 1.00 GiB of KV cache (512 blocks of 16 tokens), the available KV "
                         "cache memory is 1.00 GiB (511 blocks beside the null block); the "
                         "longest max_model_len that fits is 8176"),
            std::string::npos)
      << r33.out;
  EXPECT_FALSE(
      plan_json(
          kSpec63 +
          " --max-model-len 8176 --num-gpu-blocks-override 512")["full_length_request_unservable"]
          .get<bool>());
}

TEST(CliPlan, ConfigJsonGivesThePresetsAnswer) {
  const auto from_config = plan_json("plan --config " + data("hf_qwen2.5-7b-instruct.json") +
                                     " --gpu a100-80g --max-model-len 8192 --weights-gib 14");
  const auto from_preset =
      plan_json("plan --model qwen2.5-7b --gpu a100-80g --max-model-len 8192 --weights-gib 14");
  EXPECT_EQ(from_config["num_gpu_blocks"], from_preset["num_gpu_blocks"]);
  EXPECT_EQ(from_config["kappa_bytes"], from_preset["kappa_bytes"]);
}

// Every error: exactly one line on stderr starting "kvsim: error:", nothing on stdout, exit 2.
void expect_one_line_error(const std::string& args, const std::string& needle) {
  const CliRun merged = run_kvsim(args);
  EXPECT_EQ(merged.status, 2) << args << "\n" << merged.out;
  EXPECT_EQ(merged.out.rfind("kvsim: error: ", 0), 0u) << merged.out;
  EXPECT_EQ(count_lines(merged.out), 1u) << merged.out;
  EXPECT_NE(merged.out.find(needle), std::string::npos) << merged.out;
}

TEST(CliPlanErrors, UnknownModelListsTheKnownOnes) {
  expect_one_line_error("plan --model gpt-9", "known: qwen2.5-7b, qwen2.5-72b, llama-3.1-8b");
  expect_one_line_error("plan --model qwen2.5-7b --gpu tpu-v9", "unknown gpu 'tpu-v9'");
}

TEST(CliPlanErrors, BadSizes) {
  expect_one_line_error("plan --model qwen2.5-7b --vram-gib -24",
                        "--vram-gib must be in (0, 1e+06] (got -24)");
  expect_one_line_error("plan --model qwen2.5-7b --vram-gib 0",
                        "--vram-gib must be in (0, 1e+06] (got 0)");
  expect_one_line_error("plan --model qwen2.5-7b --gpu-memory-utilization 1.2",
                        "--gpu-memory-utilization must be in (0, 1]");
  expect_one_line_error("plan --model qwen2.5-7b --gpu-memory-utilization 0",
                        "--gpu-memory-utilization must be in (0, 1]");
  expect_one_line_error("plan --model qwen2.5-7b --overhead-gib -1",
                        "--overhead-gib must be in [0, 1e+06] (got -1)");
  expect_one_line_error("plan --model qwen2.5-7b --weights-gib -2",
                        "--weights-gib must be in [0, 1e+06] (got -2)");
  expect_one_line_error("plan --model qwen2.5-7b --max-model-len 0", "--max-model-len must be > 0");
  expect_one_line_error("plan --model qwen2.5-7b --block-size -16",
                        "--block-size must be in [1, 1048576] (got -16)");
  expect_one_line_error("plan --model qwen2.5-7b --concurrency 0", "--concurrency must be > 0");
  expect_one_line_error("plan --num-layers -1 --num-kv-heads 8 --head-dim 128 --weights-gib 1",
                        "--num-layers must be in [1, 1024] (got -1)");
  expect_one_line_error("plan --model qwen2.5-7b --vram-gib lots", "--vram-gib");
  expect_one_line_error("plan --model qwen2.5-7b --kv-cache-dtype int4", "--kv-cache-dtype");
  expect_one_line_error("plan --model qwen2.5-7b --quantization bnb", "--quantization");
  expect_one_line_error("plan --model qwen2.5-7b --gpu a100-80g --tp 3",
                        "--tensor-parallel-size (3)");
}

TEST(CliPlanErrors, MissingModelOrWeights) {
  expect_one_line_error("plan --vram-gib 24", "no model");
  expect_one_line_error("plan --num-layers 32 --num-kv-heads 8 --head-dim 128 --max-model-len 4096",
                        "--weights-gib or --num-params");
  expect_one_line_error("plan --model qwen2.5-7b --config " + data("hf_qwen2.5-7b-instruct.json"),
                        "either --model or --config");
}

TEST(CliPlanErrors, MalformedConfig) {
  expect_one_line_error("plan --config " + data("hf_malformed.json"), "malformed JSON");
  expect_one_line_error("plan --config " + data("hf_bad_field.json"),
                        "hf_bad_field.json:4: field 'num_hidden_layers'");
  expect_one_line_error("plan --config " + data("no-such-config.json"), "cannot open");
}

TEST(CliPlanErrors, DoesNotFit) {
  // BF16 70B weights on a 24 GiB card: the budget is negative.
  expect_one_line_error("plan --model llama-3.1-70b --gpu rtx4090 --max-model-len 4096",
                        "does not fit on 'rtx4090': KV budget");
  // Llama-3.1-8B at its full 131,072 context needs 16 GiB for one request.
  expect_one_line_error("plan --model llama-3.1-8b --gpu rtx4090",
                        "one request of max_model_len 131072 needs 16.00 GiB");
  expect_one_line_error(kSpec63 + " --max-model-len 8193 --num-gpu-blocks-override 512",
                        "needs 1.00 GiB of KV cache (513 blocks");
}

// The acceptance check: `kvsim plan --config <gpt-oss-20b config.json>` with an explicit
// KV budget prints exactly vLLM's start-up lines (recorded in
// tests/data/vllm_plan_goldens/<release>/gpt-oss-20b_10g_32k*.json), and the knobs move them as
// vLLM does. 0.26 here; 0.33 logs the same numbers on one line.
TEST(CliPlan, HybridGptOssPrintsVllmsLines) {
  const std::string base = "plan --config " + data("hf_gpt-oss-20b.json") +
                           " --gpu h100-80g --kv-cache-memory-bytes 10737418240"
                           " --max-model-len 32768 --vllm-version 0.26";
  CliRun r = run_kvsim(base, kStdoutOnly);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("\nGPU KV cache size: 290,413 tokens\n"
                       "Maximum concurrency for 32,768 tokens per request: 8.86x\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Hybrid KV cache"), std::string::npos) << r.out;
  r = run_kvsim(base + " --no-async-scheduling", kStdoutOnly);
  EXPECT_NE(r.out.find("per request: 10.63x"), std::string::npos) << r.out;
  r = run_kvsim(base + " --max-num-batched-tokens 2048", kStdoutOnly);
  EXPECT_NE(r.out.find("per request: 11.81x"), std::string::npos) << r.out;
  r = run_kvsim(base + " --disable-hybrid-kv-cache-manager", kStdoutOnly);
  EXPECT_NE(r.out.find("GPU KV cache size: 218,448 tokens"), std::string::npos) << r.out;
  r = run_kvsim(base + " --disable-hybrid-kv-cache-manager --no-disable-hybrid-kv-cache-manager",
                "2>&1");
  EXPECT_NE(r.status, 0);
  const nlohmann::json j = plan_json(base);
  EXPECT_EQ(j["hybrid_kv_cache_manager"], true);
  ASSERT_EQ(j["kv_cache_groups"].size(), 2u);
  EXPECT_EQ(j["kv_cache_groups"][0]["kind"], "sliding_window");
  EXPECT_EQ(j["kv_cache_groups"][0]["blocks_per_request"], 1033);
  EXPECT_EQ(j["num_gpu_blocks"], 27306);
  EXPECT_EQ(j["vllm_log_lines"][1], "Maximum concurrency for 32,768 tokens per request: 8.86x");
  const nlohmann::json j33 = plan_json(base.substr(0, base.rfind(" --vllm-version")));
  EXPECT_EQ(j33["vllm_log_lines"],
            nlohmann::json::array({"GPU KV cache size: 290,413 tokens, Maximum concurrency for "
                                   "32,768 tokens per request: 8.86x"}));
}

// vLLM 0.33's batch default on cards of >= 160 GiB (B200: 180 GiB) is 16384 tokens: twice the
// tokens in flight, so gpt-oss's window layers reserve more and fewer requests fit
// (tests/data/vllm_plan_goldens/0.33/gpt-oss-20b_b200_10g_32k_default.json). 0.26 gives 8192.
TEST(CliPlan, LargeCardBatchDefaultFollowsTheRelease) {
  const std::string base =
      "plan --model gpt-oss-20b --gpu b200 --kv-cache-memory-bytes 10737418240 "
      "--max-model-len 32768";
  const nlohmann::json j33 = plan_json(base);
  EXPECT_EQ(j33["max_num_batched_tokens"], 16384);
  EXPECT_EQ(j33["max_in_flight_tokens"], 32768);
  EXPECT_EQ(j33["vllm_log_lines"],
            nlohmann::json::array({"GPU KV cache size: 218,394 tokens, Maximum concurrency for "
                                   "32,768 tokens per request: 6.66x"}));
  const nlohmann::json j26 = plan_json(base + " --vllm-version 0.26");
  EXPECT_EQ(j26["max_num_batched_tokens"], 8192);
  EXPECT_EQ(j26["num_gpu_blocks"], j33["num_gpu_blocks"]);
  EXPECT_EQ(j26["vllm_log_lines"][1], "Maximum concurrency for 32,768 tokens per request: 8.86x");
}

TEST(CliPlanErrors, UnknownVllmVersion) {
  expect_one_line_error("plan --model qwen2.5-7b --vllm-version 0.30", "--vllm-version");
}

// Llama 4 Scout: vLLM turns the hybrid manager off for chunked local attention by default.
TEST(CliPlan, Llama4ChunkedDefaultsToTheFullAttentionLayout) {
  const std::string base =
      "plan --model llama-4-scout --gpu h100-80g --kv-cache-memory-bytes 42949672960 "
      "--max-model-len 131072";
  CliRun r = run_kvsim(base, kStdoutOnly);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("per request: 1.67x"), std::string::npos) << r.out;
  r = run_kvsim(base + " --no-disable-hybrid-kv-cache-manager", kStdoutOnly);
  EXPECT_NE(r.out.find("GPU KV cache size: 559,237 tokens"), std::string::npos) << r.out;
}

}  // namespace
