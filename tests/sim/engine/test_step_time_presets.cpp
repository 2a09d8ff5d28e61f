// The roofline built from the planner's presets, and the sanity table of docs/step-time-model.md.
#include <cmath>
#include <stdexcept>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include "kvsim/core/model_presets.h"
#include "kvsim/core/planner.h"
#include "kvsim/sim/engine/step_time_model.h"

namespace kvsim {
namespace {

TEST(RooflinePresets, Llama8bShape) {
  const ModelSpec& m = find_model_preset("llama-3.1-8b");
  const RooflineModelShape s = roofline_shape(m, 1);
  EXPECT_DOUBLE_EQ(s.weight_bytes, 8030261248.0 * 2);
  EXPECT_DOUBLE_EQ(s.kv_bytes_per_token_per_rank, 2.0 * 32 * 8 * 128 * 2);  // 131072
  EXPECT_EQ(s.num_attention_heads, 32);
  EXPECT_EQ(s.num_experts, 0);
  // fp8 KV halves kappa; tp=2 splits the 8 KV heads; tp=16 replicates one head per rank.
  EXPECT_DOUBLE_EQ(roofline_shape(m, 1, "fp8").kv_bytes_per_token_per_rank, 65536.0);
  EXPECT_DOUBLE_EQ(roofline_shape(m, 2).kv_bytes_per_token_per_rank, 65536.0);
  EXPECT_DOUBLE_EQ(roofline_shape(m, 16).kv_bytes_per_token_per_rank, 2.0 * 32 * 1 * 128 * 2);
  const RooflineGpu g = roofline_gpu(find_gpu_preset("h100-80g"));
  EXPECT_DOUBLE_EQ(g.peak_flops, 989.4e12);
  EXPECT_DOUBLE_EQ(g.hbm_bytes_per_s, 3350e9);
}

TEST(RooflinePresets, DeepSeekMoeReadsOnlyHitExperts) {
  const ModelSpec& m = find_model_preset("deepseek-v3");
  const RooflineModelShape s = roofline_shape(m, 8, "auto", 671e9);  // fp8 checkpoint: 1 B/param
  // Routed experts: (671e9 - 37e9) / (256 - 8) parameters each, 256 of them.
  EXPECT_NEAR(s.routed_expert_weight_bytes, (671e9 - 37e9) / 248 * 256, 1e3);
  // MLA: one 576-wide latent per token and layer, replicated on every rank (bf16: 2 B).
  EXPECT_DOUBLE_EQ(s.kv_bytes_per_token_per_rank, 576.0 * 2 * 61);
  RooflineParams p;
  p.tensor_parallel_size = 8;
  RooflineStepTime r(s, roofline_gpu(find_gpu_preset("h200-141g")), p);
  const double dense = 671e9 - s.routed_expert_weight_bytes;
  // One token touches 8 of 256 experts; 10,000 tokens touch essentially all of them.
  EXPECT_NEAR(r.weight_bytes_read(1), dense + s.routed_expert_weight_bytes * 8 / 256, 1e3);
  EXPECT_NEAR(r.weight_bytes_read(10000), 671e9, 1e3);
  EXPECT_LT(r.weight_bytes_read(1), r.weight_bytes_read(16));
}

TEST(RooflinePresets, FromPlanUsesQuantizedWeightsAndKvDtype) {
  PlanInputs in;
  in.model = find_model_preset("qwen2.5-7b");
  in.gpu = find_gpu_preset("rtx4090");
  in.gpu_memory_utilization = 0.9;
  in.quantization = "awq";
  in.kv_cache_dtype = "fp8";
  in.max_model_len = 8192;
  const Plan plan = compute_plan(in);
  auto model = make_step_time_model("roofline:overhead_ms=0", in, plan);
  StepWork w;
  w.add_sequence(1000, 1, false);
  const auto* r = dynamic_cast<const RooflineStepTime*>(model.get());
  ASSERT_NE(r, nullptr);
  // Weights = the plan's AWQ bytes; KV = fp8 kappa 28,672 B/token (the lesson's number).
  EXPECT_DOUBLE_EQ(r->bytes_moved(w), static_cast<double>(plan.weights_bytes) + 28672.0 * 1001);
  EXPECT_THROW(make_step_time_model("roofline:mfu=7", in, plan), std::invalid_argument);
  EXPECT_EQ(make_step_time_model("fixed:3", in, plan)->step_time_ns(w), 3'000'000);
}

TEST(RooflinePresets, MissingNumbersAreClearErrors) {
  ModelSpec m = find_model_preset("mistral-7b");
  m.num_parameters = 0;
  m.num_active_parameters = 0;
  EXPECT_THROW(roofline_shape(m, 1), std::invalid_argument);
  GpuSpec g;
  g.name = "custom";
  EXPECT_THROW(roofline_gpu(g), std::invalid_argument);
  // fixed:MS needs neither.
  EXPECT_EQ(parse_step_time_spec("fixed:2", m, g, 1)->describe(), "fixed:2ms");
}

// The sanity table printed in docs/step-time-model.md (default mfu 0.5, mbu 0.8, 1 ms overhead).
// Each row asserts the value in the table, recomputed by hand from the formula.
TEST(RooflinePresets, SanityTable) {
  const ModelSpec& m = find_model_preset("llama-3.1-8b");
  const RooflineStepTime h100(roofline_shape(m, 1), roofline_gpu(find_gpu_preset("h100-80g")));
  const double W = 8030261248.0 * 2, k = 131072, P = 8030261248.0;
  const double bw = 3350e9 * 0.8, fl = 989.4e12 * 0.5;
  const double attn = 4.0 * 32 * 32 * 128;
  struct Row {
    const char* what;
    StepWork work;
    double expect_ms;
  };
  auto decode = [](int b, int c) {
    StepWork w;
    for (int i = 0; i < b; ++i) w.add_sequence(c, 1, false);
    return w;
  };
  auto prefill = [](int c, int n) {
    StepWork w;
    w.add_sequence(c, n, true);
    return w;
  };
  const Row rows[] = {
      {"decode, batch 1, context 1k", decode(1, 1024), (W + k * 1025) / bw * 1e3 + 1},
      {"decode, batch 64, context 2k", decode(64, 2048), (W + k * 64 * 2049) / bw * 1e3 + 1},
      {"decode, batch 256, context 2k", decode(256, 2048),
       std::max((W + k * 256 * 2049) / bw, (2 * P * 256 + attn * 256 * 2048.5) / fl) * 1e3 + 1},
      {"prefill 512 tokens", prefill(0, 512),
       (2 * P * 512 + attn * 0.5 * 512 * 512) / fl * 1e3 + 1},
      {"prefill 8192 tokens", prefill(0, 8192),
       (2 * P * 8192 + attn * 0.5 * 8192.0 * 8192) / fl * 1e3 + 1},
      {"prefill chunk 2048 after 30k context", prefill(30000, 2048),
       (2 * P * 2048 + attn * (30000.0 * 2048 + 0.5 * 2048 * 2048)) / fl * 1e3 + 1},
  };
  fmt::print("| Llama-3.1-8B on H100 SXM | compute ms | memory ms | step ms | bound |\n");
  for (const Row& r : rows) {
    const StepTimeBreakdown b = h100.estimate(r.work);
    fmt::print("| {} | {:.2f} | {:.2f} | {:.2f} | {} |\n", r.what, b.compute_s * 1e3,
               b.memory_s * 1e3, b.total_s * 1e3, b.compute_bound() ? "compute" : "memory");
    EXPECT_NEAR(b.total_s * 1e3, r.expect_ms, 1e-9) << r.what;
  }
}

}  // namespace
}  // namespace kvsim
