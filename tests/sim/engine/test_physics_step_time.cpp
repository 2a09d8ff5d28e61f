// PhysicsStepTime (`--step-time physics:FILE`): each basis term against the formula in
// physics_step_time.h worked by hand, the coefficients' sum, the calibration file's checks, and
// the request overheads the replay adds to what a client sees.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "kvsim/core/kv_backend.h"
#include "kvsim/core/model_presets.h"
#include "kvsim/sim/engine/physics_step_time.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/traces/trace.h"

namespace kvsim {
namespace {

std::string shipped() {
  return std::string(KVSIM_SOURCE_DIR) + "/calibration/physics/h100-vllm-blis.json";
}

PhysicsShape tiny_physics_shape() {
  PhysicsShape s;
  s.name = "tiny";
  s.num_layers = 2;
  s.hidden_size = 8;
  s.num_attention_heads = 4;
  s.num_kv_heads = 2;
  s.head_dim = 2;
  s.intermediate_size = 16;
  return s;  // bf16 weights and KV (2 bytes)
}

PhysicsCoefficients unit_coefficients() {
  PhysicsCoefficients c;
  c.beta.fill(1.0);
  c.beta[4] = c.beta[5] = c.beta[6] = 0.0;  // no fixed overheads
  c.source = "test";
  c.path = "test.json";
  return c;
}

TEST(PhysicsStepTime, TermsMatchTheFormulaByHand) {
  const RooflineGpu gpu{"g", 1000.0, 100.0};  // FLOP/s and bytes/s small enough to read
  for (int32_t tp : {1, 2}) {
    const PhysicsStepTime m(tiny_physics_shape(), gpu, tp, unit_coefficients());
    StepWork w;
    w.add_sequence(3, 4, true);    // prefill chunk: context 3, 4 new
    w.add_sequence(10, 1, false);  // decodes at contexts 10 and 6
    w.add_sequence(6, 1, false);
    const PhysicsStepTime::Terms t = m.terms(w);
    // L = 2, d = 8, d_kv = 4, f = 16, h = 4, d_h = 2; P = 4, D = 2.
    const double proj_per_token = 2.0 * 2 * 8 * (16 + 8) / tp;  // 768 / tp
    const double ffn_per_token = 6.0 * 2 * 8 * 16 / tp;         // 1536 / tp
    const double attn = 4.0 * 2 * (4.0 / tp) * 2;               // per (query, key) pair
    const double pf_pairs = 3 * 4 + 1.5 * 16;                   // c t + 1.5 t^2 = 36
    EXPECT_DOUBLE_EQ(t.pf_compute, (4 * (proj_per_token + ffn_per_token) + attn * pf_pairs) / 1000);
    const double kv_per_token = 2.0 * 2 * (4.0 / tp) * 2;  // 32 / tp bytes
    EXPECT_DOUBLE_EQ(t.pf_kv, kv_per_token * 4 / 100);
    EXPECT_DOUBLE_EQ(t.dc_compute, (2 * (proj_per_token + ffn_per_token) + attn * 16) / 1000);
    EXPECT_DOUBLE_EQ(t.dc_kv, kv_per_token * (16 + 2) / 100);
    const double weight_bytes = (2.0 * 8 * 24 * 2 + 3.0 * 2 * 8 * 16 * 2) / tp;
    EXPECT_DOUBLE_EQ(t.weight, weight_bytes / 100);
    EXPECT_DOUBLE_EQ(t.tp, tp == 1 ? 0.0 : 2.0 * 2 * 6 * 8 * 2 * 2 * 0.5 / 100);
  }
}

TEST(PhysicsStepTime, MixtureOfExpertsReadsEveryExpertAndComputesK) {
  PhysicsShape s = tiny_physics_shape();
  s.num_experts = 8;
  s.num_experts_per_tok = 2;
  const RooflineGpu gpu{"g", 1000.0, 100.0};
  const PhysicsStepTime moe(s, gpu, 1, unit_coefficients());
  const PhysicsStepTime dense(tiny_physics_shape(), gpu, 1, unit_coefficients());
  StepWork w;
  w.add_sequence(5, 1, false);
  const double ffn_flops = 6.0 * 2 * 8 * 16;
  EXPECT_DOUBLE_EQ(moe.terms(w).dc_compute - dense.terms(w).dc_compute, ffn_flops / 1000);
  const double ffn_bytes = 3.0 * 2 * 8 * 16 * 2;
  EXPECT_DOUBLE_EQ(moe.terms(w).weight - dense.terms(w).weight, 7 * ffn_bytes / 100);
}

TEST(PhysicsStepTime, StepIsTheCoefficientWeightedSum) {
  PhysicsCoefficients c = unit_coefficients();
  c.beta = {0.5, 0.25, 2.0, 3.0, 10.0, 20.0, 100.0, 999.0, 4.0, 5.0};
  const RooflineGpu gpu{"g", 1000.0, 100.0};
  const PhysicsStepTime m(tiny_physics_shape(), gpu, 2, c);
  StepWork w;
  w.add_sequence(0, 7, true);
  w.add_sequence(9, 1, false);
  const PhysicsStepTime::Terms t = m.terms(w);
  const double expected = 0.5 * t.pf_compute + 4.0 * t.pf_kv + 0.25 * t.dc_compute + 5.0 * t.dc_kv +
                          2.0 * t.weight + 3.0 * t.tp +
                          (10.0 * 2 + 20.0 * 2 + 100.0) * 1e-6;  // b8 unused (no interleaving)
  EXPECT_DOUBLE_EQ(m.estimate(w).total_s, expected);
  EXPECT_EQ(m.estimate(StepWork{}).total_s, 0.0);
}

TEST(PhysicsStepTime, StepWorkSplitsPrefillSums) {
  StepWork w;
  w.add_sequence(3, 4, true);
  w.add_sequence(10, 1, false);
  EXPECT_EQ(w.prefill_context_x_new, 12);
  EXPECT_EQ(w.prefill_new_squared, 16);
  EXPECT_EQ(w.sum_context_x_new - w.prefill_context_x_new, 10);
  EXPECT_EQ(w.sum_new_squared - w.prefill_new_squared, 1);
}

TEST(PhysicsCalibration, ShippedFileLoads) {
  const PhysicsCoefficients c = read_physics_coefficients(shipped());
  EXPECT_EQ(c.gpu, "h100-80g");
  EXPECT_DOUBLE_EQ(c.beta[0], 0.152128);
  EXPECT_DOUBLE_EQ(c.beta[9], 1.94710771);
  EXPECT_DOUBLE_EQ(c.alpha[0], 15563.199579);
  EXPECT_NE(c.source.find("inference-sim"), std::string::npos);
  // A preset model on the card it was fitted on: a decode of Llama-3.1-8B is milliseconds.
  const ModelSpec& llama = find_model_preset("llama-3.1-8b");
  const PhysicsStepTime m(physics_shape(llama, 2.0, 2.0),
                          RooflineGpu{"h100-80g", 989.4e12, 3.35e12}, 1, c);
  StepWork w;
  for (int i = 0; i < 64; ++i) w.add_sequence(1000, 1, false);
  const double s = m.estimate(w).total_s;
  EXPECT_GT(s, 5e-3);
  EXPECT_LT(s, 30e-3);
  EXPECT_EQ(m.describe().find("uncalibrated"), std::string::npos);
  const PhysicsStepTime other(physics_shape(llama, 2.0, 2.0), RooflineGpu{"l40s", 362e12, 0.864e12},
                              1, c);
  EXPECT_NE(other.describe().find("uncalibrated for this card"), std::string::npos);
  // The report's clock line: the source and its published error, or why it does not apply.
  EXPECT_EQ(m.calibration().rfind("fitted (inference-sim/inference-sim", 0), 0u) << m.calibration();
  EXPECT_NE(m.calibration().find("E2E median error 6.7 %"), std::string::npos);
  EXPECT_EQ(other.calibration().rfind("uncalibrated for l40s", 0), 0u) << other.calibration();
}

std::string write_temp(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / name;
  std::ofstream(p) << text;
  return p.string();
}

// calibrated:FILE reads what kvsim calibrate wrote (a "fit" record) and refuses a published set.
TEST(PhysicsCalibration, CalibratedSpecNeedsKvsimCalibratesFile) {
  const ModelSpec& llama = find_model_preset("llama-3.1-8b");
  const GpuSpec& h100 = find_gpu_preset("h100-80g");
  EXPECT_FALSE(read_physics_coefficients(shipped()).from_kvsim_calibrate);
  try {
    parse_step_time_spec("calibrated:" + shipped(), llama, h100, 1);
    ADD_FAILURE() << "a published coefficient set was accepted as calibrated:";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("not written by kvsim calibrate"), std::string::npos)
        << e.what();
  }
  std::ifstream in(shipped());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.insert(text.rfind('}'), R"(, "fit": {"method": "test"})");
  const std::string own = write_temp("kvsim_calibrated_spec.json", text);
  ASSERT_TRUE(read_physics_coefficients(own).from_kvsim_calibrate);
  const auto from_calibrated = parse_step_time_spec("calibrated:" + own, llama, h100, 1);
  const auto from_physics = parse_step_time_spec("physics:" + own, llama, h100, 1);
  StepWork w;
  for (int i = 0; i < 8; ++i) w.add_sequence(500, 1, false);
  EXPECT_DOUBLE_EQ(from_calibrated->estimate(w).total_s, from_physics->estimate(w).total_s);
  EXPECT_THROW(parse_step_time_spec("calibrated:", llama, h100, 1), std::invalid_argument);
}

TEST(PhysicsCalibration, BadFilesNameFileAndKey) {
  const std::string ok_beta = R"("beta": [1,1,1,1,1,1,1,1,1,1])";
  const std::string ok_alpha = R"("alpha": [1,2,3])";
  struct Case {
    std::string text;
    std::string expect;
  };
  const Case cases[] = {
      {R"({"format": "kvsim-physics/2", "source": "s", )" + ok_beta + ", " + ok_alpha + "}",
       R"("format" must be "kvsim-physics/1")"},
      {R"({"format": "kvsim-physics/1", )" + ok_beta + ", " + ok_alpha + "}",
       R"(missing key "source")"},
      {R"({"format": "kvsim-physics/1", "source": "s", "betas": [], )" + ok_beta + ", " + ok_alpha +
           "}",
       R"(unknown key "betas")"},
      {R"({"format": "kvsim-physics/1", "source": "s", "beta": [1,1,1,-1,1,1,1,1,1,1], )" +
           ok_alpha + "}",
       "beta[3] must be a finite number >= 0, got -1"},
      {R"({"format": "kvsim-physics/1", "source": "s", )" + ok_beta + R"(, "alpha": [1,2]})",
       R"("alpha" must be an array of 3 numbers)"},
      {R"({"format": "kvsim-physics/1", "source": "s", "beta": [1,1,1,1,1,1,1,1,1,"x"], )" +
           ok_alpha + "}",
       R"(beta[9] must be a finite number >= 0, got "x")"},
      {"[1, 2]", "must be a JSON object"},
  };
  for (const Case& c : cases) {
    const std::string path = write_temp("kvsim_physics_bad.json", c.text);
    try {
      read_physics_coefficients(path);
      ADD_FAILURE() << "accepted: " << c.text;
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      EXPECT_NE(msg.find(c.expect), std::string::npos) << msg;
    }
  }
  EXPECT_THROW(read_physics_coefficients("/nonexistent/kvsim.json"), std::invalid_argument);
}

// The alphas reach the client-visible times and nothing else: the same schedule (steps, engine
// clock), TTFT later by a0 + a2, the end by a0 + a2 * output + a1.
TEST(PhysicsStepTime, RequestOverheadsShiftClientTimesOnly) {
  PhysicsCoefficients c = unit_coefficients();
  PhysicsCoefficients with = c;
  with.alpha = {15000.0, 700.0, 40.0};
  const RooflineGpu gpu{"g", 1e12, 1e11};
  const PhysicsStepTime plain(tiny_physics_shape(), gpu, 1, c);
  const PhysicsStepTime host(tiny_physics_shape(), gpu, 1, with);
  Trace t;
  for (int i = 0; i < 20; ++i) {
    TraceRequest r;
    r.arrival_ns = i * 3'000'000;
    r.input_tokens = 30 + i;
    r.output_tokens = 5 + i % 7;
    t.requests.push_back(r);
  }
  ReplayConfig cfg;
  cfg.scheduler.block_size = 16;
  cfg.scheduler.num_gpu_blocks = 100;
  cfg.scheduler.max_model_len = 128;
  NullKvBackend null;
  const ReplayResult a = run_replay(cfg, t, null, plain);
  const ReplayResult b = run_replay(cfg, t, null, host);
  ASSERT_EQ(a.timeline.size(), b.timeline.size());
  EXPECT_EQ(a.summary.sim_ns, b.summary.sim_ns);
  for (size_t i = 0; i < a.requests.size(); ++i) {
    const RequestRecord& x = a.requests[i];
    const RequestRecord& y = b.requests[i];
    EXPECT_EQ(y.first_token_ns - x.first_token_ns, 15'000'000 + 40'000);
    EXPECT_EQ(y.finish_ns - x.finish_ns, 15'000'000 + 40'000 * x.output_tokens + 700'000);
    EXPECT_EQ(y.first_scheduled_ns - x.first_scheduled_ns, 15'000'000);
  }
  EXPECT_NEAR(b.summary.latency.ttft.mean - a.summary.latency.ttft.mean, 0.01504, 1e-9);
}

}  // namespace
}  // namespace kvsim
