// The GPU profiler's plain C++ half (profile_writer.h) with fake timings: statistics, per-rank
// operator shapes, the token grids, the CSV layout, the attn_mbu fit, and the round trip of a
// written directory through `--step-time profile:DIR` (read_operator_profile and
// ProfileStepTime give back the written medians, interpolated linearly between grid points).
#include "kvsim/sim/engine/profile_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "kvsim/core/model_presets.h"
#include "kvsim/sim/engine/profile_step_time.h"
#include "kvsim/sim/engine/profile_tables.h"
#include "scratch_dir_test.h"
#include "step_work_fixture.h"

namespace kvsim {
namespace {

const std::string kH100Llama2Mlp =
    kSource + "/calibration/vidur/compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv";

// Arithmetic "GPU": GEMMs at 400 TFLOP/s + 5 us, memory at 3 TB/s + 3 us, decode attention at
// 60 % of the H200 preset's 4.8 TB/s + 10 us. Each shape's samples are {1.2, 1, 0.95, 1, 3} x its
// time, so the median is the time exactly and the mean and max are not.
class FakeTimer final : public OperatorTimer {
 public:
  static constexpr double kMbu = 0.6;
  static constexpr double kHbm = 4.8e12;

  static double gemm_ms(int64_t m, int64_t n, int64_t k) {
    return 0.005 + 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) /
                       400e12 * 1e3;
  }
  static double memory_ms(int64_t r, int64_t w) {
    return 0.003 + static_cast<double>(r + w) / 3e12 * 1e3;
  }
  static double attention_ms(const DecodeAttentionShape& s) {
    return 0.01 + static_cast<double>(s.kv_bytes()) / (kMbu * kHbm) * 1e3;
  }

  std::vector<double> gemm(int64_t m, int64_t n, int64_t k, int32_t warmup, int32_t reps) override {
    note(warmup, reps);
    ++gemms;
    return samples(gemm_ms(m, n, k));
  }
  std::vector<double> memory(int64_t r, int64_t w, int32_t warmup, int32_t reps) override {
    note(warmup, reps);
    ++memories;
    return samples(memory_ms(r, w));
  }
  std::vector<double> decode_attention(const DecodeAttentionShape& s, int32_t warmup,
                                       int32_t reps) override {
    note(warmup, reps);
    ++attentions;
    return samples(attention_ms(s));
  }

  int gemms = 0, memories = 0, attentions = 0;
  int32_t seen_warmup = -1, seen_reps = -1;

 private:
  void note(int32_t warmup, int32_t reps) {
    seen_warmup = warmup;
    seen_reps = reps;
  }
  static std::vector<double> samples(double v) { return {v * 1.2, v, v * 0.95, v, v * 3}; }
};

// The layer time the reader must give at a profiled point: the 9 layer ops' medians (emb not).
double expected_layer_ms(const ModelSpec& m, int32_t tp, int64_t tokens) {
  double sum = 0;
  for (const LayerOpShape& s : layer_op_shapes(m, tp)) {
    if (s.op == "emb") continue;
    sum += s.kind == LayerOpShape::Kind::kGemm
               ? FakeTimer::gemm_ms(tokens, s.n, s.k)
               : FakeTimer::memory_ms(tokens * s.read_bytes_per_token,
                                      tokens * s.write_bytes_per_token);
  }
  return sum;
}

ProfileProvenance fake_provenance() {
  ProfileProvenance p;
  p.card = "none (test)";
  p.gpu_preset = "h200-141g";
  p.hbm_bytes_per_s = FakeTimer::kHbm;
  p.date = "2000-01-01T00:00:00Z";
  p.commit = "0000000";
  p.command = "test";
  p.measured = false;
  return p;
}

TEST(ProfileWriter, TimingStatsAreVidursColumns) {
  const std::vector<double> odd = {3, 1, 2, 10, 4};
  const TimingStats s = summarize_timings(odd);
  EXPECT_EQ(s.samples, 5);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 10);
  EXPECT_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.mean, 4);
  EXPECT_DOUBLE_EQ(s.std, std::sqrt((1 + 9 + 4 + 36 + 0) / 5.0));  // population std
  const std::vector<double> even = {4, 1, 2, 3};
  EXPECT_DOUBLE_EQ(summarize_timings(even).median, 2.5);
  EXPECT_THROW(summarize_timings(std::vector<double>{}), std::invalid_argument);
  EXPECT_THROW(summarize_timings(std::vector<double>{1, -1}), std::invalid_argument);
  EXPECT_THROW(summarize_timings(std::vector<double>{std::numeric_limits<double>::quiet_NaN()}),
               std::invalid_argument);
}

TEST(ProfileWriter, LayerShapesPerRank) {
  const ModelSpec& m = find_model_preset("llama-3.1-8b");  // 32 q, 8 kv x 128, 4096, 14336
  const auto tp1 = layer_op_shapes(m, 1);
  ASSERT_EQ(tp1.size(), kMlpCsvOps.size());
  for (size_t i = 0; i < tp1.size(); ++i) EXPECT_EQ(tp1[i].op, kMlpCsvOps[i]);
  EXPECT_EQ(tp1[2].n, (32 + 2 * 8) * 128);  // fused QKV
  EXPECT_EQ(tp1[2].k, 4096);
  EXPECT_EQ(tp1[4].n, 4096);  // O
  EXPECT_EQ(tp1[4].k, 32 * 128);
  EXPECT_EQ(tp1[6].n, 2 * 14336);                         // gate + up
  EXPECT_EQ(tp1[8].k, 14336);                             // down
  EXPECT_EQ(tp1[7].read_bytes_per_token, 2 * 14336 * 2);  // act reads gate and up (bf16)
  EXPECT_EQ(tp1[7].write_bytes_per_token, 14336 * 2);
  const auto tp8 = layer_op_shapes(m, 8);  // 4 q heads, 1 KV head per rank
  EXPECT_EQ(tp8[2].n, (4 + 2 * 1) * 128);
  EXPECT_EQ(tp8[4].k, 4 * 128);
  EXPECT_EQ(tp8[6].n, 2 * 14336 / 8);
  EXPECT_EQ(tp8[8].k, 14336 / 8);
  EXPECT_EQ(tp8[3].read_bytes_per_token, (4 + 1) * 128 * 2);  // RoPE on q and k
  EXPECT_THROW(layer_op_shapes(m, 3), std::invalid_argument);
  EXPECT_THROW(layer_op_shapes(m, 0), std::invalid_argument);
  EXPECT_THROW(layer_op_shapes(find_model_preset("qwen3-30b-a3b"), 1), std::invalid_argument);
  EXPECT_THROW(layer_op_shapes(find_model_preset("deepseek-v3"), 8), std::invalid_argument);
}

TEST(ProfileWriter, VidurGridIsTheShippedTablesTokens) {
  const OperatorProfile shipped = read_operator_profile(kH100Llama2Mlp);
  const std::vector<double>& xs = shipped.layer_ms.at(1).xs();
  const std::vector<int64_t> grid = vidur_token_grid(4096);
  ASSERT_EQ(grid.size(), 259u);
  ASSERT_EQ(grid.size(), xs.size());
  for (size_t i = 0; i < grid.size(); ++i) EXPECT_EQ(static_cast<double>(grid[i]), xs[i]) << i;
  EXPECT_EQ(vidur_token_grid(8192).back(), 8192);
  EXPECT_EQ(vidur_token_grid(5).back(), 5);

  const std::vector<int64_t> coarse = coarse_token_grid(4096);
  EXPECT_EQ(coarse.size(), 24u);
  EXPECT_EQ(coarse.front(), 1);
  EXPECT_EQ(coarse.back(), 4096);
  for (size_t i = 1; i < coarse.size(); ++i) EXPECT_LT(coarse[i - 1], coarse[i]);
  EXPECT_EQ(coarse_token_grid(100).back(), 100);
  EXPECT_THROW(coarse_token_grid(0), std::invalid_argument);
}

TEST(ProfileWriter, PlanPicksTheTpsTheModelDivides) {
  const ModelSpec& m = find_model_preset("qwen2.5-7b");  // 28 heads: 1, 2, 4, not 8
  const GpuProfilePlan p = make_gpu_profile_plan(m, {}, "coarse", 1024);
  EXPECT_EQ(p.tps, (std::vector<int32_t>{1, 2, 4}));
  EXPECT_EQ(p.tokens.back(), 1024);
  ASSERT_FALSE(p.attention.empty());
  for (const DecodeAttentionShape& a : p.attention) {
    EXPECT_LE(int64_t{a.batch} * a.context, int64_t{1} << 20);
    EXPECT_EQ(a.head_dim, 128);
  }
  EXPECT_THROW(make_gpu_profile_plan(m, {8}, "coarse"), std::invalid_argument);
  EXPECT_THROW(make_gpu_profile_plan(m, {1}, "fine"), std::invalid_argument);
}

TEST(ProfileWriter, HeaderIsVidursAndRowsAreComplete) {
  const ModelSpec& m = find_model_preset("llama-3.1-8b");
  GpuProfilePlan plan = make_gpu_profile_plan(m, {1, 2}, "coarse", 64);
  plan.warmup = 2;
  plan.repetitions = 5;
  FakeTimer timer;
  const GpuProfileResult r = run_gpu_profile(plan, timer);
  EXPECT_EQ(timer.seen_warmup, 2);
  EXPECT_EQ(timer.seen_reps, 5);
  const int rows = static_cast<int>(plan.tps.size() * plan.tokens.size());
  EXPECT_EQ(timer.gemms, 4 * rows);
  EXPECT_EQ(timer.memories, 6 * rows);
  EXPECT_EQ(timer.attentions, static_cast<int>(plan.attention.size()));

  std::ostringstream csv;
  write_mlp_csv(csv, r);
  std::istringstream lines(csv.str());
  std::string header, shipped_header;
  std::getline(lines, header);
  std::ifstream shipped(kH100Llama2Mlp);
  std::getline(shipped, shipped_header);
  if (!shipped_header.empty() && shipped_header.back() == '\r') shipped_header.pop_back();
  EXPECT_EQ(header, shipped_header);
  int n = 0;
  for (std::string line; std::getline(lines, line);) {
    ++n;
    EXPECT_NE(line.find(",32,8,4096,14336,128256,True,"), std::string::npos) << line;
  }
  EXPECT_EQ(n, rows);
}

class ProfileWriterDir : public kvsim_test::ScratchDirTest {};

TEST_F(ProfileWriterDir, RoundTripThroughTheProfileReader) {
  const ModelSpec& m = find_model_preset("llama-3.1-8b");
  const GpuProfilePlan plan = make_gpu_profile_plan(m, {}, "coarse", 4096);
  ASSERT_EQ(plan.tps, (std::vector<int32_t>{1, 2, 4, 8}));
  FakeTimer timer;
  const GpuProfileResult r = run_gpu_profile(plan, timer);
  const std::string dir = (dir_ / "prof").string();
  const std::string spec = write_profile_dir(dir, r, fake_provenance());
  EXPECT_EQ(spec, "profile:" + dir + ",attn_mbu=0.600");

  const OperatorProfile ops = read_operator_profile(dir + "/mlp.csv");
  EXPECT_EQ(ops.n_head, 32);
  EXPECT_EQ(ops.n_kv_head, 8);
  EXPECT_EQ(ops.n_embd, 4096);
  EXPECT_EQ(ops.n_expanded_embd, 14336);
  EXPECT_EQ(ops.max_tokens, 4096);
  ASSERT_EQ(ops.layer_ms.size(), 4u);
  for (const int32_t tp : plan.tps) {
    const PiecewiseLinear& curve = ops.layer_ms.at(tp);
    ASSERT_EQ(curve.xs().size(), plan.tokens.size());
    for (const int64_t t : plan.tokens) {  // exact at the measured points
      EXPECT_DOUBLE_EQ(curve(static_cast<double>(t)), expected_layer_ms(m, tp, t))
          << tp << " " << t;
    }
    // Linear between them: 20 tokens is 1/2 of the way from 16 to 24.
    EXPECT_DOUBLE_EQ(curve(20),
                     0.5 * (expected_layer_ms(m, tp, 16) + expected_layer_ms(m, tp, 24)));
  }

  // Through `--step-time profile:DIR` as the CLI builds it.
  const GpuSpec& h200 = find_gpu_preset("h200-141g");
  const auto model = make_profile_step_time(spec, m, h200, 1);
  const auto* profile = dynamic_cast<const ProfileStepTime*>(model.get());
  ASSERT_NE(profile, nullptr);
  EXPECT_DOUBLE_EQ(profile->attention_efficiency().mbu, 0.6);
  const StepWork w = decode_batch(20, 1000);
  EXPECT_NEAR(profile->terms(w).layers,
              32 * 0.5 * (expected_layer_ms(m, 1, 16) + expected_layer_ms(m, 1, 24)) * 1e-3, 1e-12);
  const StepWork at_point = decode_batch(256, 500);
  EXPECT_NEAR(profile->terms(at_point).layers, 32 * expected_layer_ms(m, 1, 256) * 1e-3, 1e-12);
  // attn_kv with the fitted mbu: kappa (all layers, one rank) x tokens / (W x 0.6).
  const double kappa = 32.0 * 8 * 128 * 2 * 2;
  EXPECT_NEAR(profile->terms(at_point).attn_kv,
              kappa * (256 * 500 + 256) / (h200.hbm_gb_per_s * 1e9 * 0.6), 1e-12);

  // TP > 1 needs an all-reduce table (not measured on one GPU), as README.md says.
  EXPECT_THROW(make_profile_step_time(spec, m, h200, 2), std::invalid_argument);
  const auto tp2 = make_profile_step_time(spec + ",all_reduce=" + kH100Dgx, m, h200, 2);
  const auto* p2 = dynamic_cast<const ProfileStepTime*>(tp2.get());
  ASSERT_NE(p2, nullptr);
  EXPECT_NEAR(p2->terms(at_point).layers, 32 * expected_layer_ms(m, 2, 256) * 1e-3, 1e-12);
  EXPECT_GT(p2->terms(at_point).all_reduce, 0);

  std::ifstream readme(dir + "/README.md");
  std::string first;
  std::getline(readme, first);
  EXPECT_EQ(first, "# FAKE TIMINGS: not measured on a GPU (a test or dry run)");
  std::stringstream rest;
  rest << readme.rdbuf();
  EXPECT_NE(rest.str().find("--step-time " + spec), std::string::npos);
  EXPECT_NE(rest.str().find("0000000"), std::string::npos);
  EXPECT_TRUE(std::filesystem::is_regular_file(dir + "/attention.csv"));
}

TEST(ProfileWriter, AttentionMbuFit) {
  const ModelSpec& m = find_model_preset("llama-3.1-8b");
  const std::vector<int32_t> tps = {1, 8};
  std::vector<AttentionRow> rows;
  for (const DecodeAttentionShape& s : decode_attention_grid(m, tps)) {
    rows.push_back({s, summarize_timings(std::vector<double>{FakeTimer::attention_ms(s)})});
  }
  ASSERT_GE(rows.size(), 2u);
  const auto mbu = fit_attention_mbu(rows, FakeTimer::kHbm);
  ASSERT_TRUE(mbu.has_value());
  EXPECT_NEAR(*mbu, FakeTimer::kMbu, 1e-9);
  // Clamped to the model's range: a "bandwidth" above the card's reads as 1.
  EXPECT_EQ(fit_attention_mbu(rows, FakeTimer::kHbm / 10), 1.0);
  EXPECT_FALSE(fit_attention_mbu(std::span(rows).first(1), FakeTimer::kHbm).has_value());
  EXPECT_FALSE(fit_attention_mbu(rows, 0).has_value());
  std::vector<AttentionRow> flat = rows;
  for (AttentionRow& a : flat) a.stats.median = 1;
  EXPECT_FALSE(fit_attention_mbu(flat, FakeTimer::kHbm).has_value());
}

}  // namespace
}  // namespace kvsim
