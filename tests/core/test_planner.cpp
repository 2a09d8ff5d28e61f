// Golden and unit tests of the capacity planner: the lesson's table, spec section 6.3's worked
// example, the off-by-one case, and the arithmetic pieces.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kvsim/core/model_presets.h"
#include "kvsim/core/param.h"
#include "kvsim/core/planner.h"

namespace kvsim {
namespace {

// The lesson's card: 24 GiB, util 0.90, overhead 1.6 GiB, S = 8192.
PlanInputs lesson_inputs() {
  PlanInputs in;
  in.model = find_model_preset("qwen2.5-7b");
  in.gpu.name = "lesson";
  in.gpu.vram_gib = 24;
  in.gpu_memory_utilization = 0.90;
  in.overhead_gib = 1.6;
  in.max_model_len = 8192;
  return in;
}

// Spec 6.3: 32 layers x 8 KV heads x 128, bf16, bs 16, available exactly 60 GiB.
PlanInputs spec_inputs(int64_t max_model_len, VllmVersion v = VllmVersion::kV0_26) {
  PlanInputs in;
  in.vllm_version = v;
  in.model.name = "spec-6.3";
  in.model.num_layers = 32;
  in.model.num_kv_heads = 8;
  in.model.head_dim = 128;
  in.gpu.name = "spec";
  in.gpu.vram_gib = 60;
  in.gpu_memory_utilization = 1.0;
  in.overhead_gib = 0;
  in.weights_gib = 0.0;
  in.max_model_len = max_model_len;
  return in;
}

TEST(PlannerLesson, BF16WeightsBF16Kv) {
  const Plan p = compute_plan(lesson_inputs());
  EXPECT_EQ(p.kappa_bytes, 57344);  // 2 * 28 * 4 * 128 * 2
  EXPECT_DOUBLE_EQ(p.weights_gib, 7.615e9 * 2 / kGiB);
  EXPECT_NEAR(p.kv_budget_gib, 5.8, 0.05);
  EXPECT_EQ(p.kv_per_seq_bytes, 57344LL * 8192);
  EXPECT_EQ(p.max_concurrency, 13);
}

TEST(PlannerLesson, AwqWeightsBF16Kv) {
  PlanInputs in = lesson_inputs();
  in.weights_gib = 5.5;
  const Plan p = compute_plan(in);
  EXPECT_NEAR(p.kv_budget_gib, 14.5, 1e-9);
  EXPECT_EQ(p.max_concurrency, 33);
}

TEST(PlannerLesson, AwqWeightsFp8Kv) {
  PlanInputs in = lesson_inputs();
  in.weights_gib = 5.5;
  in.kv_cache_dtype = "fp8";
  const Plan p = compute_plan(in);
  EXPECT_EQ(p.kappa_bytes, 28672);
  EXPECT_EQ(p.max_concurrency, 66);
}

TEST(PlannerLesson, InverseQuestionSixtyFourStreams) {
  PlanInputs in = lesson_inputs();
  in.weights_gib = 5.5;
  in.kv_cache_dtype = "fp8";
  in.concurrency = 64;
  const Plan p = compute_plan(in);
  ASSERT_TRUE(p.max_context_tokens.has_value());
  EXPECT_EQ(*p.max_context_tokens, 8484);
  // vLLM's view of the same question: whole blocks out of the N - 1 usable ones.
  ASSERT_TRUE(p.vllm_max_context_tokens.has_value());
  EXPECT_EQ(*p.vllm_max_context_tokens, (p.num_gpu_blocks - 1) / 64 * 16);
}

TEST(PlannerLesson, AvailableBytesFollowVllmRounding) {
  const Plan p = compute_plan(lesson_inputs());
  // ceil(24 GiB * 0.9) - 15.23e9 - round(1.6 GiB)
  const auto requested = static_cast<int64_t>(std::ceil(24 * kGiB * 0.9));
  EXPECT_EQ(p.kv_budget_bytes, requested - 15230000000LL - std::llround(1.6 * kGiB));
  EXPECT_EQ(p.page_size_bytes, 2 * 16 * 4 * 128 * 2);
  EXPECT_EQ(p.num_gpu_blocks, p.kv_budget_bytes / p.page_size_bytes / 28);
}

TEST(PlannerSpec63, WorkedExample) {
  const Plan p = compute_plan(spec_inputs(131072));
  EXPECT_EQ(p.page_size_bytes, 65536);
  EXPECT_EQ(p.kv_budget_bytes, 64424509440LL);
  EXPECT_EQ(p.num_gpu_blocks, 30720);
  EXPECT_EQ(p.blocks_per_request, 8192);
  EXPECT_DOUBLE_EQ(p.vllm_max_concurrency, 3.75);
  EXPECT_EQ(p.gpu_kv_cache_tokens, 491520);
  EXPECT_EQ(
      vllm_kv_cache_report_lines(p),
      (std::vector<std::string>{"GPU KV cache size: 491,520 tokens",
                                "Maximum concurrency for 131,072 tokens per request: 3.75x"}));
  EXPECT_FALSE(p.full_length_request_unservable);
}

// vLLM 0.33 logs the same numbers on one line (update_kv_cache_capacity).
TEST(PlannerSpec63, WorkedExampleVllm033OneLine) {
  const Plan p = compute_plan(spec_inputs(131072, VllmVersion::kV0_33));
  EXPECT_EQ(p.vllm_version, VllmVersion::kV0_33);
  EXPECT_EQ(p.num_gpu_blocks, 30720);
  EXPECT_EQ(vllm_kv_cache_report_lines(p),
            (std::vector<std::string>{"GPU KV cache size: 491,520 tokens, Maximum concurrency for "
                                      "131,072 tokens per request: 3.75x"}));
  // The default release is 0.33.
  EXPECT_EQ(PlanInputs{}.vllm_version, VllmVersion::kV0_33);
}

TEST(PlannerSpec63, LengthNotAMultipleOfBlockSize) {
  // cdiv(131000, 16) = 8188; tokens = int(30720 / 8188 * 131000) = 491,489, not N * bs.
  const Plan p = compute_plan(spec_inputs(131000));
  EXPECT_EQ(p.num_gpu_blocks, 30720);
  EXPECT_EQ(p.blocks_per_request, 8188);
  EXPECT_DOUBLE_EQ(p.vllm_max_concurrency, 30720.0 / 8188.0);
  EXPECT_EQ(p.gpu_kv_cache_tokens, 491489);
  EXPECT_NE(p.gpu_kv_cache_tokens, 30720 * 16);
  EXPECT_EQ(
      vllm_kv_cache_report_lines(p),
      (std::vector<std::string>{"GPU KV cache size: 491,489 tokens",
                                "Maximum concurrency for 131,000 tokens per request: 3.75x"}));
}

TEST(PlannerSpec63, OffByOneStartsButNeverAdmits) {
  // 1 GiB of KV = 512 blocks of 2 MiB; a 8192-token request needs exactly 512 blocks.
  PlanInputs in = spec_inputs(8192);
  in.gpu.vram_gib = 1;
  const Plan p = compute_plan(in);
  EXPECT_EQ(p.num_gpu_blocks, 512);
  EXPECT_EQ(p.blocks_per_request, 512);
  EXPECT_EQ(p.usable_blocks, 511);
  EXPECT_TRUE(p.full_length_request_unservable);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("never admitted"), std::string::npos);
  EXPECT_EQ(vllm_kv_cache_report_lines(p).at(1),
            "Maximum concurrency for 8,192 tokens per request: 1.00x");
  // One token longer needs 513 blocks: vLLM refuses to start.
  in.max_model_len = 8193;
  EXPECT_THROW(compute_plan(in), DoesNotFitError);
  // One block shorter leaves the full-length request servable.
  in.max_model_len = 8192 - 16;
  EXPECT_FALSE(compute_plan(in).full_length_request_unservable);
}

TEST(PlannerSpec63, OverrideReplacesThePool) {
  PlanInputs in = spec_inputs(8192);
  in.num_gpu_blocks_override = 1000;
  const Plan p = compute_plan(in);
  EXPECT_EQ(p.num_gpu_blocks, 1000);
  EXPECT_TRUE(p.num_gpu_blocks_overridden);
  EXPECT_DOUBLE_EQ(p.vllm_max_concurrency, 1000.0 / 512.0);
  in.num_gpu_blocks_override = 511;  // smaller than one request
  EXPECT_THROW(compute_plan(in), DoesNotFitError);
  in.num_gpu_blocks_override = 512;
  EXPECT_TRUE(compute_plan(in).full_length_request_unservable);
}

// vLLM 0.33 checks the fit against the memory less the null block: the request needing every
// block (which 0.26 starts with and never admits) is a start-up error, with vLLM's message.
TEST(PlannerSpec63, Vllm033RefusesTheRequestNeedingEveryBlock) {
  PlanInputs in = spec_inputs(8192, VllmVersion::kV0_33);
  in.gpu.vram_gib = 1;  // 512 blocks of 2 MiB; 8192 tokens need 512
  try {
    compute_plan(in);
    FAIL() << "0.33 started with a request needing every block";
  } catch (const DoesNotFitError& e) {
    EXPECT_EQ(std::string(e.what()),
              "model 'spec-6.3' does not fit on 'spec': one request of max_model_len 8192 needs "
              "1.00 GiB of KV cache (512 blocks of 16 tokens), the available KV cache memory is "
              "1.00 GiB (511 blocks beside the null block); the longest max_model_len that fits "
              "is 8176");
    EXPECT_EQ(e.vllm_error(),
              "To serve at least one request with the model's max seq len (8192), (1.0 GiB KV "
              "cache is needed, which is larger than the available KV cache memory (1.0 GiB). "
              "Based on the available memory, the estimated maximum model length is 8176. Try "
              "increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU "
              "backend) or decreasing `max_model_len` when initializing the engine. See "
              "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more "
              "details.");
  }
  in.max_model_len = 8176;  // 511 blocks: fits, and no warning
  const Plan p = compute_plan(in);
  EXPECT_FALSE(p.full_length_request_unservable);
  EXPECT_TRUE(p.warnings.empty());
  EXPECT_EQ(p.num_gpu_blocks, 512);
  // 0.26 with the same 8192: starts, with the warning, and vLLM's 0.26 message on 8193.
  in.max_model_len = 8192;
  in.vllm_version = VllmVersion::kV0_26;
  EXPECT_TRUE(compute_plan(in).full_length_request_unservable);
  in.max_model_len = 8193;
  try {
    compute_plan(in);
    FAIL();
  } catch (const DoesNotFitError& e) {
    EXPECT_NE(std::string(e.what()).find("the available KV cache memory is 1.00 GiB (512 blocks); "
                                         "the longest max_model_len that fits is 8192"),
              std::string::npos)
        << e.what();
    EXPECT_NE(e.vllm_error().find("(1.0 GiB KV cache is needed, which is larger than the "
                                  "available KV cache memory (1.0 GiB). Based on the available "
                                  "memory, the estimated maximum model length is 8192. Try"),
              std::string::npos)
        << e.vllm_error();
  }
}

// num_gpu_blocks_override under 0.33: O blocks hold O - 1 for requests; O == 1 is "no memory".
TEST(PlannerSpec63, Vllm033OverrideHoldsTheNullBlock) {
  PlanInputs in = spec_inputs(8192, VllmVersion::kV0_33);
  in.num_gpu_blocks_override = 513;
  EXPECT_EQ(compute_plan(in).num_gpu_blocks, 513);
  in.num_gpu_blocks_override = 512;
  EXPECT_THROW(compute_plan(in), DoesNotFitError);
  in.num_gpu_blocks_override = 1;
  in.max_model_len = 16;
  try {
    compute_plan(in);
    FAIL() << "a pool of the null block alone started";
  } catch (const DoesNotFitError& e) {
    EXPECT_EQ(e.vllm_error().rfind("No available memory for the cache blocks. Try increasing "
                                   "`gpu_memory_utilization` when initializing the engine",
                                   0),
              0u)
        << e.vllm_error();
  }
  in.vllm_version = VllmVersion::kV0_26;  // 0.26: one block holds one block
  EXPECT_EQ(compute_plan(in).num_gpu_blocks, 1);
  // A pool of one block from the budget (2 MiB + change) is "no memory" under 0.33 too.
  in = spec_inputs(16, VllmVersion::kV0_33);
  in.kv_cache_memory_bytes = 2 * 1024 * 1024 + 100;
  EXPECT_THROW(compute_plan(in), DoesNotFitError);
  in.kv_cache_memory_bytes = 2 * 2 * 1024 * 1024;
  EXPECT_EQ(compute_plan(in).num_gpu_blocks, 2);
}

// A budget <= 0 is "No available memory" in both releases.
TEST(PlannerSpec63, NoBudgetIsVllmsNoAvailableMemory) {
  for (VllmVersion v : {VllmVersion::kV0_26, VllmVersion::kV0_33}) {
    PlanInputs in = spec_inputs(8192, v);
    in.weights_gib = 61.0;
    try {
      compute_plan(in);
      FAIL();
    } catch (const DoesNotFitError& e) {
      EXPECT_NE(std::string(e.what()).find("KV budget"), std::string::npos);
      EXPECT_EQ(e.vllm_error().rfind("No available memory for the cache blocks.", 0), 0u);
    }
  }
}

// vLLM's format_gib: Python's repr of round(bytes / 2**30, 2).
TEST(PlannerArithmetic, FormatGibIsPythonsRound) {
  EXPECT_EQ(vllm_format_gib(int64_t{16} << 30), "16.0");
  EXPECT_EQ(vllm_format_gib(int64_t{1} << 29), "0.5");
  EXPECT_EQ(vllm_format_gib(0), "0.0");
  EXPECT_EQ(vllm_format_gib(static_cast<int64_t>(131.42 * kGiB)), "131.42");
  EXPECT_EQ(vllm_format_gib(static_cast<int64_t>(1.1 * kGiB)), "1.1");
  EXPECT_EQ(vllm_format_gib((int64_t{16} << 30) - (int64_t{1} << 20)), "16.0");  // 15.999
  EXPECT_EQ(vllm_format_gib(static_cast<int64_t>(0.125 * kGiB)), "0.12");        // half to even
}

TEST(PlannerArithmetic, VllmHelpers) {
  EXPECT_EQ(vllm_num_gpu_blocks(64424509440LL, 65536, 32), 30720);
  EXPECT_EQ(vllm_num_gpu_blocks(65536LL * 32 - 1, 65536, 32), 0);
  EXPECT_EQ(vllm_num_gpu_blocks(-5, 65536, 32), 0);
  EXPECT_DOUBLE_EQ(vllm_max_concurrency(100, 17, 16), 50.0);  // cdiv(17, 16) = 2
  EXPECT_EQ(vllm_kv_cache_tokens(100, 17, 16), 850);          // 50 * 17, not 100 * 16
  EXPECT_EQ(vllm_kv_cache_tokens(3, 10, 4), 10);              // int(3 / 3 * 10)
}

TEST(PlannerArithmetic, FormatThousands) {
  EXPECT_EQ(format_thousands(0), "0");
  EXPECT_EQ(format_thousands(999), "999");
  EXPECT_EQ(format_thousands(1000), "1,000");
  EXPECT_EQ(format_thousands(491520), "491,520");
  EXPECT_EQ(format_thousands(1234567890), "1,234,567,890");
  EXPECT_EQ(format_thousands(-1234), "-1,234");
}

TEST(PlannerArithmetic, ConcurrencyLineRoundsLikePrintf) {
  Plan p;
  p.vllm_version = VllmVersion::kV0_26;
  p.max_model_len = 8192;
  p.vllm_max_concurrency = 0.125;  // exactly representable: %.2f rounds half to even -> 0.12
  EXPECT_EQ(vllm_kv_cache_report_lines(p).at(1),
            "Maximum concurrency for 8,192 tokens per request: 0.12x");
  p.vllm_max_concurrency = 64.0;
  EXPECT_EQ(vllm_kv_cache_report_lines(p).at(1),
            "Maximum concurrency for 8,192 tokens per request: 64.00x");
  p.vllm_version = VllmVersion::kV0_33;
  EXPECT_EQ(vllm_kv_cache_report_lines(p).at(0),
            "GPU KV cache size: 0 tokens, Maximum concurrency for 8,192 tokens per request: "
            "64.00x");
}

TEST(PlannerArithmetic, PageSizes) {
  ModelSpec gqa;
  gqa.num_layers = 32;
  gqa.num_kv_heads = 8;
  gqa.head_dim = 128;
  EXPECT_EQ(page_size_bytes(gqa, 8, "bfloat16", 16), 2 * 16 * 8 * 128 * 2);
  EXPECT_EQ(page_size_bytes(gqa, 8, "fp8", 16), 2 * 16 * 8 * 128);
  EXPECT_EQ(page_size_bytes(gqa, 8, "float32", 1), 2 * 8 * 128 * 4);
  const ModelSpec& ds = find_model_preset("deepseek-v3");
  EXPECT_EQ(page_size_bytes(ds, 1, "bfloat16", 16), 16 * (512 + 64) * 2);  // no factor 2
  EXPECT_EQ(page_size_bytes(ds, 1, "fp8", 16), 16 * 576);
  EXPECT_EQ(page_size_bytes(ds, 1, "fp8_ds_mla", 64), 64 * 656);
}

TEST(PlannerArithmetic, DtypeBytes) {
  EXPECT_EQ(dtype_bytes("bfloat16"), 2);
  EXPECT_EQ(dtype_bytes("float16"), 2);
  EXPECT_EQ(dtype_bytes("float32"), 4);
  EXPECT_EQ(dtype_bytes("fp8_e5m2"), 1);
  EXPECT_THROW(dtype_bytes("int3"), PlanError);
}

TEST(PlannerTensorParallel, KvHeadsPerRank) {
  EXPECT_EQ(kv_heads_per_rank(8, 1), 8);
  EXPECT_EQ(kv_heads_per_rank(8, 4), 2);
  EXPECT_EQ(kv_heads_per_rank(8, 8), 1);
  EXPECT_EQ(kv_heads_per_rank(4, 8), 1);  // replicated on 2 ranks each
  EXPECT_THROW(kv_heads_per_rank(8, 3), PlanError);
  EXPECT_THROW(kv_heads_per_rank(4, 6), PlanError);
  EXPECT_THROW(kv_heads_per_rank(8, 0), PlanError);
}

TEST(PlannerTensorParallel, PlanIsPerGpu) {
  PlanInputs in;
  in.model = find_model_preset("llama-3.1-70b");
  in.gpu = find_gpu_preset("h100-80g");
  in.max_model_len = 8192;
  in.tensor_parallel_size = 4;
  const Plan p = compute_plan(in);
  EXPECT_EQ(p.num_kv_heads_per_rank, 2);
  EXPECT_EQ(p.kappa_bytes, 2 * 80 * 2 * 128 * 2);
  EXPECT_DOUBLE_EQ(p.weights_gib, 70553706496.0 * 2 / 4 / kGiB);
  // Llama-3.1-8B has 8 KV heads: at TP 16 each rank holds one head, replicated on 2 ranks.
  in.model = find_model_preset("llama-3.1-8b");
  in.tensor_parallel_size = 16;
  const Plan r = compute_plan(in);
  EXPECT_EQ(r.num_kv_heads_per_rank, 1);
  EXPECT_EQ(r.kappa_bytes, 2 * 32 * 1 * 128 * 2);
  EXPECT_FALSE(r.notes.empty());
}

TEST(PlannerModels, MlaKappaIsReplicatedLatent) {
  PlanInputs in;
  in.model = find_model_preset("deepseek-v3");
  in.gpu = find_gpu_preset("h200-141g");
  in.tensor_parallel_size = 8;
  in.max_model_len = 32768;
  const Plan p = compute_plan(in);
  EXPECT_EQ(p.kappa_bytes, 61 * 576 * 2);  // 70,272 B/token, the same on every rank
  EXPECT_EQ(p.quantization, "fp8");        // the checkpoint's own quantization
  EXPECT_GT(p.num_gpu_blocks, 0);
  EXPECT_FALSE(p.notes.empty());
}

// Gemma 2 alternates sliding-window and full layers: vLLM's hybrid manager groups them.
TEST(PlannerModels, SlidingWindowIsNoted) {
  PlanInputs in;
  in.model = find_model_preset("gemma-2-9b");
  in.gpu = find_gpu_preset("l40s");
  const Plan p = compute_plan(in);
  EXPECT_EQ(p.max_model_len, 8192);  // default: max_position_embeddings
  EXPECT_EQ(p.kappa_bytes, 2 * 42 * 8 * 256 * 2);
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_NE(p.notes[0].find("sliding window of 4096 tokens"), std::string::npos);
  EXPECT_TRUE(p.hybrid_kv_cache_manager);
  EXPECT_EQ(p.kv_cache_groups.size(), 2u);
}

TEST(PlannerWeights, QuantizedWeightsKeepEmbeddingsWide) {
  PlanInputs in = lesson_inputs();
  in.quantization = "awq";
  const Plan p = compute_plan(in);
  const double embed = 152064.0 * 3584 * 2;  // embed_tokens + lm_head (untied), bf16
  const double expected = embed * 2 + (7.615e9 - embed) * (0.5 + 20.0 / 128 / 8);
  EXPECT_DOUBLE_EQ(p.weights_gib, expected / kGiB);
  in.quantization = "fp8";
  EXPECT_DOUBLE_EQ(compute_plan(in).weights_gib, (embed * 2 + (7.615e9 - embed)) / kGiB);
}

TEST(PlannerErrors, BudgetNotPositive) {
  PlanInputs in = lesson_inputs();
  in.weights_gib = 21.0;  // 21.6 - 21 - 1.6 < 0
  try {
    compute_plan(in);
    FAIL() << "expected DoesNotFitError";
  } catch (const DoesNotFitError& e) {
    EXPECT_NE(std::string(e.what()).find("-1.00 GiB"), std::string::npos) << e.what();
  }
}

TEST(PlannerErrors, OneRequestLargerThanThePool) {
  PlanInputs in = lesson_inputs();
  in.max_model_len = 32768 * 4;  // 7 GiB of KV for one request > 5.8 GiB
  try {
    compute_plan(in);
    FAIL() << "expected DoesNotFitError";
  } catch (const DoesNotFitError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("131072"), std::string::npos) << msg;
    EXPECT_NE(msg.find("7.00 GiB"), std::string::npos) << msg;
  }
}

TEST(PlannerErrors, InvalidInputs) {
  auto bad = [](auto mutate) {
    PlanInputs in = lesson_inputs();
    mutate(in);
    EXPECT_THROW(compute_plan(in), PlanError);
  };
  bad([](PlanInputs& in) { in.gpu_memory_utilization = 0; });
  bad([](PlanInputs& in) { in.gpu_memory_utilization = 1.01; });
  bad([](PlanInputs& in) { in.gpu.vram_gib = -24; });
  bad([](PlanInputs& in) { in.overhead_gib = -1; });
  bad([](PlanInputs& in) { in.weights_gib = -1.0; });
  bad([](PlanInputs& in) { in.block_size = 0; });
  bad([](PlanInputs& in) { in.concurrency = 0; });
  bad([](PlanInputs& in) { in.num_gpu_blocks_override = -3; });
  bad([](PlanInputs& in) { in.kv_cache_dtype = "int4"; });
  bad([](PlanInputs& in) { in.kv_cache_dtype = "fp8_ds_mla"; });  // not an MLA model
  bad([](PlanInputs& in) { in.quantization = "bnb"; });
  bad([](PlanInputs& in) { in.model.num_layers = 0; });
  bad([](PlanInputs& in) {
    in.model.num_parameters = 0;  // weights unknown and not given
  });
}

// The PlanError message compute_plan throws ("" if none), its parameters spelled as the CLI
// shows them (core/param.h).
std::string plan_error(const PlanInputs& in, ParamSpelling spelling = ParamSpelling::kCli) {
  try {
    compute_plan(in);
  } catch (const PlanError& e) {
    return spell_params(e.what(), spelling);
  }
  return {};
}

TEST(PlannerErrors, EachFrontEndSpellsTheParameter) {
  PlanInputs in = lesson_inputs();
  in.block_size = 0;
  EXPECT_EQ(plan_error(in), "--block-size must be in [1, 1048576] (got 0)");
  EXPECT_EQ(plan_error(in, ParamSpelling::kPython), "block_size= must be in [1, 1048576] (got 0)");
  EXPECT_EQ(plan_error(in, ParamSpelling::kNeutral), "block_size must be in [1, 1048576] (got 0)");
  in = lesson_inputs();
  in.kv_cache_dtype = "fp8_ds_mla";  // with the value the user gave
  EXPECT_EQ(plan_error(in, ParamSpelling::kPython),
            "kv_cache_dtype=fp8_ds_mla needs an MLA model ('qwen2.5-7b' is not one)");
  EXPECT_EQ(plan_error(in),
            "--kv-cache-dtype fp8_ds_mla needs an MLA model ('qwen2.5-7b' is not one)");
}

TEST(PlannerErrors, ShapeAndCardBoundsNameTheField) {
  // The reviewer's inputs: each once overflowed int64 (negative kappa, kappa 0, UB on a
  // double->int64 conversion, a budget silently capped at INT64_MAX).
  PlanInputs in = lesson_inputs();
  in.model.num_layers = INT64_MAX;
  EXPECT_EQ(plan_error(in),
            "model 'qwen2.5-7b': num_layers must be in [1, 1024] (got "
            "9223372036854775807)");
  in = lesson_inputs();
  in.model.num_layers = int64_t{1} << 62;
  in.model.head_dim = 4;
  EXPECT_EQ(plan_error(in),
            "model 'qwen2.5-7b': num_layers must be in [1, 1024] (got "
            "4611686018427387904)");
  in = lesson_inputs();
  in.model.num_kv_heads = 65537;
  in.model.num_attention_heads = 0;
  EXPECT_EQ(plan_error(in), "model 'qwen2.5-7b': num_kv_heads must be in [1, 65536] (got 65537)");
  in = lesson_inputs();
  in.model.head_dim = 65537;
  EXPECT_EQ(plan_error(in), "model 'qwen2.5-7b': head_dim must be in [1, 65536] (got 65537)");
  in = lesson_inputs();
  in.model.num_parameters = 1e300;
  EXPECT_EQ(plan_error(in), "model 'qwen2.5-7b': num_parameters must be <= 1e+15 (got 1e+300)");
  in = lesson_inputs();
  in.gpu.vram_gib = 1e308;
  EXPECT_EQ(plan_error(in), "--vram-gib must be in (0, 1e+06] (got 1e+308)");
  in.gpu.vram_gib = 1e12;
  EXPECT_EQ(plan_error(in), "--vram-gib must be in (0, 1e+06] (got 1e+12)");
  in = lesson_inputs();
  in.overhead_gib = 1e300;
  EXPECT_EQ(plan_error(in), "--overhead-gib must be in [0, 1e+06] (got 1e+300)");
  in = lesson_inputs();
  in.weights_gib = 1e300;
  EXPECT_EQ(plan_error(in), "--weights-gib must be in [0, 1e+06] (got 1e+300)");
  in = lesson_inputs();
  in.block_size = kMaxBlockSize + 1;
  EXPECT_EQ(plan_error(in), "--block-size must be in [1, 1048576] (got 1048577)");
  in = lesson_inputs();
  in.tensor_parallel_size = int64_t{1} << 40;
  EXPECT_EQ(plan_error(in), "--tensor-parallel-size must be in [1, 65536] (got 1099511627776)");
}

TEST(PlannerErrors, ByteArithmeticIsOverflowChecked) {
  // Within the bounds, a huge max_model_len (or override) can still leave int64.
  PlanInputs in = lesson_inputs();
  in.max_model_len = 9'000'000'000'000'000'000;
  EXPECT_EQ(plan_error(in),
            "KV bytes per sequence (kappa x max_model_len) overflows 64-bit integers (57344 x "
            "9000000000000000000)");
  in = lesson_inputs();
  in.num_gpu_blocks_override = 9'000'000'000'000'000'000;
  EXPECT_EQ(plan_error(in),
            "--num-gpu-blocks-override x bytes per block overflows 64-bit integers "
            "(9000000000000000000 x 917504)");
  // Every bound at once: the block (2^20 tokens x 2^16 heads x 2^16 dims x 2 x 2 B = 2^54 B per
  // layer, x 1024 layers) leaves int64, and says so.
  in = lesson_inputs();
  in.model.num_layers = kMaxNumLayers;
  in.model.num_kv_heads = kMaxHeads;
  in.model.num_attention_heads = kMaxHeads;
  in.model.head_dim = kMaxHeadDim;
  in.block_size = kMaxBlockSize;
  in.gpu.vram_gib = kMaxVramGib;
  EXPECT_EQ(plan_error(in), "bytes per block overflows 64-bit integers (18014398509481984 x 1024)");
  // With vLLM's block size the largest model shape is plain arithmetic (and does not fit).
  in.block_size = 16;
  EXPECT_THROW(compute_plan(in), DoesNotFitError);
  // A huge --concurrency is a valid (if silly) question: S_max is 0, not UB.
  in = lesson_inputs();
  in.concurrency = 9'000'000'000'000'000'000;
  EXPECT_EQ(compute_plan(in).max_context_tokens, 0);
  // page_size_bytes on its own is checked too.
  ModelSpec m = find_model_preset("qwen2.5-7b");
  m.head_dim = int64_t{1} << 40;
  EXPECT_THROW(page_size_bytes(m, int64_t{1} << 20, "float32", int64_t{1} << 20), PlanError);
}

TEST(PlannerPresets, LookupIsCaseInsensitiveAndListsNames) {
  EXPECT_EQ(find_model_preset("Qwen2.5-7B").num_layers, 28);
  EXPECT_EQ(find_gpu_preset("H200-141G").vram_gib, 141);
  try {
    find_model_preset("gpt-5");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("llama-3.1-8b"), std::string::npos);
  }
  EXPECT_THROW(find_gpu_preset("tpu"), std::invalid_argument);
  for (const ModelSpec& m : model_presets()) EXPECT_NO_THROW(validate_model_spec(m)) << m.name;
  // GPU presets' invariants: test_gpu_presets.cpp.
}

// The estimator against published parameter counts (safetensors totals).
TEST(PlannerPresets, ParameterEstimateMatchesPublishedCounts) {
  ParameterShapes none;
  EXPECT_EQ(estimate_parameters(find_model_preset("llama-3.1-8b"), none).total, 8030261248.0);
  EXPECT_EQ(estimate_parameters(find_model_preset("llama-3.1-70b"), none).total, 70553706496.0);
  EXPECT_EQ(estimate_parameters(find_model_preset("mistral-7b"), none).total, 7248023552.0);
  ParameterShapes qwen;
  qwen.attention_bias = true;
  EXPECT_EQ(estimate_parameters(find_model_preset("qwen2.5-72b"), qwen).total, 72706203648.0);
  EXPECT_EQ(estimate_parameters(find_model_preset("qwen2.5-7b"), qwen).total, 7615616512.0);
  // Gemma-2 has 4 norms per layer (the estimator assumes 2): within 2 * 3584 * 42 params.
  EXPECT_NEAR(estimate_parameters(find_model_preset("gemma-2-9b"), none).total, 9241705984.0,
              2.0 * 3584 * 42);
  ParameterShapes ds;
  ds.moe_intermediate_size = 2048;
  ds.num_shared_experts = 1;
  ds.first_k_dense_replace = 3;
  ds.q_lora_rank = 1536;
  ds.qk_nope_head_dim = 128;
  ds.v_head_dim = 128;
  const ParameterEstimate est = estimate_parameters(find_model_preset("deepseek-v3"), ds);
  EXPECT_NEAR(est.total / 1e9, 671.0, 671.0 * 0.01);
  EXPECT_NEAR(est.active / 1e9, 37.0, 37.0 * 0.03);
}

// Every plan carries the allocator's layout; a full-attention model is one group of all layers
// whose pool is num_gpu_blocks (vLLM _get_kv_cache_groups_uniform_spec + one tensor per layer).
TEST(Planner, FullAttentionKvCacheConfigMatchesTheBlockArithmetic) {
  const Plan p = compute_plan(lesson_inputs());
  const KVCacheConfig& c = p.kv_cache_config;
  validate_kv_cache_config(c);
  ASSERT_EQ(c.kv_cache_groups.size(), 1u);
  EXPECT_EQ(c.num_blocks, p.num_gpu_blocks);
  EXPECT_EQ(c.block_size(), p.block_size);
  EXPECT_EQ(c.kv_cache_groups[0].kv_cache_spec.kind, KVCacheSpecKind::kFullAttention);
  EXPECT_EQ(c.kv_cache_groups[0].kv_cache_spec.page_size_bytes, p.page_size_bytes);
  EXPECT_EQ(static_cast<int64_t>(c.kv_cache_groups[0].layer_indices.size()), p.num_layers);
  ASSERT_EQ(static_cast<int64_t>(c.kv_cache_tensors.size()), p.num_layers);
  EXPECT_EQ(c.kv_cache_tensors[0].size_bytes, p.page_size_bytes * p.num_gpu_blocks);
}

}  // namespace
}  // namespace kvsim
