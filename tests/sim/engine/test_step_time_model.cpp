// StepTimeModel: values against hand-computed roofline numbers, monotonicity, spec parsing.
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include "kvsim/core/param.h"
#include "kvsim/sim/engine/step_time_model.h"

#include "step_work_fixture.h"

namespace kvsim {
namespace {

// Llama-3.1-8B: 8.03e9 parameters (bf16: 16.06e9 bytes), 32 layers, 32 query heads, 8 KV heads,
// head_dim 128 -> kappa = 2 * 32 * 8 * 128 * 2 B = 131072 B/token.
RooflineModelShape llama8b() {
  return {"llama-3.1-8b", 8.03e9, 16.06e9, 32, 32, 128, 131072.0};
}
// H100 SXM: 989.4 TFLOP/s dense bf16, 3.35 TB/s HBM3.
RooflineGpu h100() {
  return {"h100-80g", 989.4e12, 3.35e12};
}

TEST(StepWork, AggregatesExactSums) {
  StepWork w;
  w.add_sequence(0, 512, true);
  w.add_sequence(100, 1, false);
  w.add_sequence(300, 1, false);
  EXPECT_EQ(w.num_seqs, 3);
  EXPECT_EQ(w.num_prefill_seqs, 1);
  EXPECT_EQ(w.num_prefill_tokens, 512);
  EXPECT_EQ(w.num_decode_tokens, 2);
  EXPECT_EQ(w.num_tokens(), 514);
  EXPECT_EQ(w.sum_context_tokens, 400);
  EXPECT_EQ(w.sum_context_x_new, 400);
  EXPECT_EQ(w.sum_new_squared, 512 * 512 + 2);
  w.clear();
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.num_seqs, 0);
}

TEST(FixedStepTime, ConstantForNonEmptyStepsZeroForEmpty) {
  FixedStepTime m(12.5);
  EXPECT_EQ(m.step_time_ns(decode_batch(1, 10)), 12'500'000);
  EXPECT_EQ(m.step_time_ns(decode_batch(200, 4000)), 12'500'000);
  EXPECT_EQ(m.step_time_ns(StepWork{}), 0);
  EXPECT_EQ(m.describe(), "fixed:12.5ms");
  EXPECT_THROW(FixedStepTime(0.0), std::invalid_argument);
  EXPECT_THROW(FixedStepTime(-1.0), std::invalid_argument);
}

TEST(RooflineStepTime, DecodeBatchOneIsWeightBandwidthBound) {
  RooflineStepTime m(llama8b(), h100());
  const StepWork w = decode_batch(1, 1000);
  // Hand computation: bytes = W + kappa * (context + new) = 16.06e9 + 131072 * 1001.
  const double bytes = 16.06e9 + 131072.0 * 1001;
  const double flops = 2 * 8.03e9 * 1 + 4.0 * 32 * 32 * 128 * (1000 * 1 + 0.5 * 1);
  EXPECT_DOUBLE_EQ(m.bytes_moved(w), bytes);
  EXPECT_DOUBLE_EQ(m.flops(w), flops);
  const StepTimeBreakdown b = m.estimate(w);
  EXPECT_NEAR(b.memory_s, bytes / (3.35e12 * 0.8), 1e-12);
  EXPECT_NEAR(b.compute_s, flops / (989.4e12 * 0.5), 1e-12);
  EXPECT_FALSE(b.compute_bound());
  // ~16 GB / (3.35 TB/s * 0.8) = 6.04 ms, plus 1 ms overhead.
  EXPECT_NEAR(b.memory_s * 1e3, 6.04, 0.01);
  EXPECT_NEAR(b.total_s, b.memory_s + 1e-3, 1e-15);
  EXPECT_EQ(m.step_time_ns(w), std::llround(b.total_s * 1e9));
}

TEST(RooflineStepTime, LongPrefillIsComputeBound) {
  RooflineStepTime m(llama8b(), h100());
  StepWork w;
  w.add_sequence(0, 8192, true);
  const double flops = 2 * 8.03e9 * 8192 + 4.0 * 32 * 32 * 128 * (0.5 * 8192.0 * 8192.0);
  const StepTimeBreakdown b = m.estimate(w);
  EXPECT_TRUE(b.compute_bound());
  EXPECT_NEAR(b.compute_s, flops / (989.4e12 * 0.5), 1e-12);
  EXPECT_NEAR(b.compute_s * 1e3, 301.6, 0.5);  // ~0.3 s at 50% MFU
}

TEST(RooflineStepTime, MonotoneInBatchContextAndChunk) {
  RooflineStepTime m(llama8b(), h100());
  int64_t prev = 0;
  for (int batch : {1, 2, 8, 32, 128, 256, 512, 1024}) {
    const int64_t t = m.step_time_ns(decode_batch(batch, 2000));
    EXPECT_GE(t, prev) << "batch " << batch;
    prev = t;
  }
  prev = 0;
  for (int context : {0, 100, 1000, 10000, 100000}) {
    const int64_t t = m.step_time_ns(decode_batch(64, context));
    EXPECT_GE(t, prev) << "context " << context;
    prev = t;
  }
  prev = 0;
  for (int chunk : {1, 16, 256, 2048, 8192, 16384}) {
    StepWork w;
    w.add_sequence(4096, chunk, true);
    const int64_t t = m.step_time_ns(w);
    EXPECT_GE(t, prev) << "chunk " << chunk;
    prev = t;
  }
  // Decode crossover: memory-bound at batch 64, compute-bound at batch 1024 (short contexts).
  EXPECT_FALSE(m.estimate(decode_batch(64, 100)).compute_bound());
  EXPECT_TRUE(m.estimate(decode_batch(1024, 100)).compute_bound());
}

TEST(RooflineStepTime, TensorParallelDividesWeightsAndFlops) {
  RooflineModelShape shape = llama8b();
  RooflineParams p1;
  RooflineStepTime tp1(shape, h100(), p1);
  shape.kv_bytes_per_token_per_rank /= 2;  // 8 KV heads over 2 ranks
  RooflineParams p2;
  p2.tensor_parallel_size = 2;
  RooflineStepTime tp2(shape, h100(), p2);
  const StepWork w = decode_batch(16, 3000);
  EXPECT_DOUBLE_EQ(tp2.flops(w), tp1.flops(w) / 2);
  EXPECT_DOUBLE_EQ(tp2.bytes_moved(w), tp1.bytes_moved(w) / 2);
  EXPECT_LT(tp2.step_time_ns(w), tp1.step_time_ns(w));
}

TEST(RooflineStepTime, EmptyStepCostsNothing) {
  RooflineStepTime m(llama8b(), h100());
  EXPECT_EQ(m.step_time_ns(StepWork{}), 0);
}

TEST(RooflineStepTime, RejectsBadShapesAndParams) {
  RooflineModelShape bad = llama8b();
  bad.num_layers = 0;
  EXPECT_THROW(RooflineStepTime(bad, h100()), std::invalid_argument);
  RooflineGpu gpu = h100();
  gpu.hbm_bytes_per_s = 0;
  EXPECT_THROW(RooflineStepTime(llama8b(), gpu), std::invalid_argument);
  RooflineParams p;
  p.tensor_parallel_size = 0;
  EXPECT_THROW(RooflineStepTime(llama8b(), h100(), p), std::invalid_argument);
}

TEST(StepTimeModel, RefusesAStepLongerThanOneHour) {
  // 1 mfu-limited step of 2^40 x 2^20 attention pairs: ~4e18 FLOPs / (989e12 * 0.001) s, far
  // beyond an hour; the clock must get an error, not a clamped or overflowing value.
  RooflineParams p;
  p.mfu = 0.001;
  const RooflineStepTime m(llama8b(), h100(), p);
  StepWork w;
  w.add_sequence(int64_t{1} << 40, int64_t{1} << 20, true);
  const double s = m.estimate(w).total_s;
  ASSERT_GT(s, kMaxStepSeconds);
  try {
    (void)m.step_time_ns(w);
    FAIL() << "no error for a " << s << " s step";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("step time model {} gives {:g} s for a step of 1048576 tokens in 1 "
                          "sequences (limit 3600 s per step)",
                          m.describe(), s));
  }
  // One hour exactly is allowed.
  EXPECT_EQ(FixedStepTime(3.6e6).step_time_ns(w), int64_t{3600} * 1'000'000'000);
}

// step_time_ns rounds s * 1e9 as std::llround does (halves away from zero) over the whole range,
// halves and their neighbours included (it no longer calls llround).
TEST(StepTimeModel, RoundsNanosecondsAsLlround) {
  std::vector<double> ms = {1e-6,      1.5e-6,     2.5e-6,     0.0000005 + 1e-6,
                            10.0,      10.0000005, 10.0000015, 0.1,
                            1.0 / 3.0, 2.0 / 3.0,  3.6e6,      3.6e6 - 0.0000005};
  std::mt19937_64 rng(271);
  std::uniform_real_distribution<double> any(1e-6, 3.6e6);
  std::uniform_int_distribution<int64_t> whole_ns(1, int64_t{3'600'000'000'000});
  for (int i = 0; i < 20000; ++i) {
    ms.push_back(any(rng));
    const double half = (static_cast<double>(whole_ns(rng)) + 0.5) * 1e-6;  // x.5 ns
    ms.push_back(half);
    ms.push_back(std::nextafter(half, 0.0));
    ms.push_back(std::nextafter(half, 1e9));
  }
  StepWork w;
  w.add_sequence(0, 1, false);
  for (const double m : ms) {
    if (!(m >= 1e-6 && m <= 3.6e6)) continue;
    const FixedStepTime f(m);
    ASSERT_EQ(f.step_time_ns(w), std::llround(f.estimate(w).total_s * 1e9))
        << fmt::format("{:.17g}", m);
  }
}

TEST(ParseStepTimeSpec, FixedAndRooflineForms) {
  auto fixed = parse_step_time_spec("fixed:10", llama8b(), h100(), 1);
  EXPECT_EQ(fixed->step_time_ns(decode_batch(1, 1)), 10'000'000);

  // v0: the historical constants on every card (today's `roofline` byte for byte).
  auto def = parse_step_time_spec("roofline:v0", llama8b(), h100(), 1);
  const auto* r = dynamic_cast<const RooflineStepTime*>(def.get());
  ASSERT_NE(r, nullptr);
  EXPECT_DOUBLE_EQ(r->params().mfu, 0.5);
  EXPECT_DOUBLE_EQ(r->params().mbu, 0.8);
  EXPECT_DOUBLE_EQ(r->params().overhead_ms, 1.0);
  EXPECT_EQ(def->describe(),
            "roofline(llama-3.1-8b on h100-80g, tp=1, mfu=0.5, mbu=0.8, overhead_ms=1)");
  EXPECT_EQ(def->calibration().rfind("uncalibrated: roofline constants not fitted", 0), 0u);

  auto tuned =
      parse_step_time_spec("roofline:v0,overhead_ms=0,mfu=0.4,mbu=0.9", llama8b(), h100(), 2);
  r = dynamic_cast<const RooflineStepTime*>(tuned.get());
  ASSERT_NE(r, nullptr);
  EXPECT_DOUBLE_EQ(r->params().mfu, 0.4);
  EXPECT_DOUBLE_EQ(r->params().mbu, 0.9);
  EXPECT_DOUBLE_EQ(r->params().overhead_ms, 0.0);
  EXPECT_EQ(r->params().tensor_parallel_size, 2);
  EXPECT_EQ(r->describe(),
            "roofline(llama-3.1-8b on h100-80g, tp=2, mfu=0.4, mbu=0.9, overhead_ms=0)");
}

TEST(ParseStepTimeSpec, CardDefaultsOnlyForCardsWithData) {
  // h100-80g has fitted defaults: `roofline` starts from them and says so.
  const RooflineCardDefaults* card = roofline_card_defaults(h100());
  ASSERT_NE(card, nullptr);
  auto fitted = parse_step_time_spec("roofline", llama8b(), h100(), 1);
  const auto* r = dynamic_cast<const RooflineStepTime*>(fitted.get());
  ASSERT_NE(r, nullptr);
  EXPECT_DOUBLE_EQ(r->params().mfu, card->params.mfu);
  EXPECT_DOUBLE_EQ(r->params().mbu, card->params.mbu);
  EXPECT_DOUBLE_EQ(r->params().overhead_ms, card->params.overhead_ms);
  EXPECT_DOUBLE_EQ(r->params().queue_ms, card->params.queue_ms);
  EXPECT_TRUE(r->params().lm_head);
  EXPECT_TRUE(r->params().cuda_graph_padding);
  EXPECT_TRUE(r->params().allreduce);
  EXPECT_EQ(fitted->calibration().rfind("fitted for h100-80g on 16 public vLLM", 0), 0u)
      << fitted->calibration();
  EXPECT_EQ(fitted->calibration().find("overridden"), std::string::npos);
  EXPECT_DOUBLE_EQ(fitted->request_overheads().queueing_s, card->params.queue_ms * 1e-3);
  // A key overrides one constant and the clock line says which.
  auto over = parse_step_time_spec("roofline:mfu=0.4", llama8b(), h100(), 1);
  EXPECT_DOUBLE_EQ(dynamic_cast<const RooflineStepTime&>(*over).params().mfu, 0.4);
  EXPECT_DOUBLE_EQ(dynamic_cast<const RooflineStepTime&>(*over).params().mbu, card->params.mbu);
  EXPECT_NE(over->calibration().find("(overridden by the spec: mfu)"), std::string::npos);
  // A card without data (or the same name with other peaks) keeps v0 and says uncalibrated.
  for (const RooflineGpu& g :
       {RooflineGpu{"a100-80g", 312e12, 2.039e12}, RooflineGpu{"h100-80g", 989.4e12, 2.0e12}}) {
    EXPECT_EQ(roofline_card_defaults(g), nullptr) << g.name;
    auto plain = parse_step_time_spec("roofline", llama8b(), g, 1);
    auto v0 = parse_step_time_spec("roofline:v0", llama8b(), g, 1);
    EXPECT_EQ(plain->describe(), v0->describe());
    EXPECT_EQ(plain->calibration(), v0->calibration());
    EXPECT_EQ(plain->calibration().rfind("uncalibrated:", 0), 0u);
    const StepWork w = decode_batch(32, 1000);
    EXPECT_EQ(plain->step_time_ns(w), v0->step_time_ns(w));
  }
}

TEST(RooflineV1Terms, LmHeadSeqCostAndHopLatency) {
  RooflineModelShape s = llama8b();
  s.hidden_size = 4096;
  s.lm_head_params = 128256.0 * 4096;         // vocab x hidden
  s.embedding_params = 2 * s.lm_head_params;  // untied: embedding + LM head
  RooflineParams p;
  p.lm_head = true;
  p.seq_us = 50;
  const RooflineStepTime m(s, h100(), p);
  StepWork w;
  w.add_sequence(0, 512, true);
  w.add_sequence(100, 1, false);
  // Linear FLOPs: the body on every token, the LM head on each of the 2 sequences.
  const double body = 2.0 * (8.03e9 - 2 * 128256.0 * 4096) * 513;
  const double head = 2.0 * 128256.0 * 4096 * 2;
  const double attn = 4.0 * 32 * 32 * 128 * (100.0 + 0.5 * (512.0 * 512 + 1));
  EXPECT_NEAR(m.flops(w), body + head + attn, 1e-6 * (body + head + attn));
  EXPECT_DOUBLE_EQ(m.estimate(w).overhead_s, 1e-3 + 2 * 50e-6);
  // Off (v0): 2 P T as before.
  const RooflineStepTime v0(s, h100(), RooflineParams{});
  EXPECT_NEAR(v0.flops(w), 2.0 * 8.03e9 * 513 + attn, 1e-6 * (2.0 * 8.03e9 * 513 + attn));
  // allreduce_hop_us: an all-reduce's latency is 2 (tp - 1) ring steps.
  RooflineGpu g = h100();
  g.interconnect_bytes_per_s = 450e9;
  g.interconnect_latency_s = 37e-6;
  RooflineParams ar;
  ar.allreduce = true;
  ar.allreduce_hop_us = 4;
  ar.tensor_parallel_size = 4;
  const RooflineStepTime tp4(s, g, ar);
  const StepWork one = decode_batch(1, 10);
  const double bytes = 1.0 * 4096 * 2;
  EXPECT_NEAR(tp4.comm_seconds(one), 2.0 * 32 * (1.5 * bytes / 450e9 + 6 * 4e-6), 1e-12);
  EXPECT_NE(tp4.describe().find("(6 ring steps x 4 us)"), std::string::npos) << tp4.describe();
}

TEST(ParseStepTimeSpec, BadSpecsNameTheProblem) {
  const struct {
    const char* spec;
    const char* needle;
  } cases[] = {
      {"fixed", "expected fixed:MS"},
      {"fixed:", "MS must be a number"},
      {"fixed:abc", "MS must be a number, got 'abc'"},
      {"fixed:5ms", "MS must be a number, got '5ms'"},
      {"fixed:-3", "fixed step time must be in [1e-06, 3.6e+06] ms (1 ns to one hour), got -3"},
      {"fixed:0", "fixed step time must be in [1e-06, 3.6e+06] ms (1 ns to one hour), got 0"},
      // Below 1 ns a step would round to 0 ns on the clock (issue 23).
      {"fixed:1e-9",
       "fixed step time must be in [1e-06, 3.6e+06] ms (1 ns to one hour), got 1e-09"},
      {"fixed:1e300",
       "fixed step time must be in [1e-06, 3.6e+06] ms (1 ns to one hour), got 1e+300"},
      {"fixed:3600000.5", "must be in [1e-06, 3.6e+06] ms (1 ns to one hour), got 3.6e+06"},
      {"gpu", "unknown model 'gpu'"},
      {"", "unknown model ''"},
      {"roofline:", "empty parameter list"},
      {"roofline:mfu=2", "mfu must be in [0.001, 1], got 2"},
      {"roofline:mbu=0", "mbu must be in [0.001, 1], got 0"},
      {"roofline:mfu=1e-300", "mfu must be in [0.001, 1], got 1e-300"},
      {"roofline:overhead_ms=-1", "overhead_ms must be in [0, 3.6e+06] (one hour), got -1"},
      {"roofline:overhead_ms=1e300", "overhead_ms must be in [0, 3.6e+06] (one hour), got 1e+300"},
      {"roofline:mfu", "expected key=value, got 'mfu'"},
      {"roofline:mfu=0.4,", "trailing ','"},
      {"roofline:mfu=0.4,mfu=0.5", "'mfu' given twice"},
      {"roofline:flops=3", "unknown parameter 'flops'"},
      {"roofline:mfu=nan", "mfu must be a number"},
      {"roofline:v0,", "trailing ','"},
      {"roofline:mfu=0.4,v0", "expected key=value, got 'v0'"},
      {"roofline:v1", "expected key=value, got 'v1'"},
      {"roofline:v0,lm_head=2", "lm_head must be 0 or 1, got 2"},
      {"roofline:seq_us=-1", "seq_us must be in [0, 1e6], got -1"},
      {"roofline:allreduce_hop_us=-1", "allreduce_hop_us must be in [0, 1e6], got -1"},
  };
  for (const auto& c : cases) {
    try {
      parse_step_time_spec(c.spec, llama8b(), h100(), 1);
      ADD_FAILURE() << "no error for '" << c.spec << "'";
    } catch (const std::invalid_argument& e) {
      const std::string msg = spell_params(e.what(), ParamSpelling::kCli);
      EXPECT_NE(msg.find(fmt::format("--step-time '{}'", c.spec)), std::string::npos) << msg;
      EXPECT_NE(msg.find(c.needle), std::string::npos) << "spec '" << c.spec << "': " << msg;
    }
  }
}

}  // namespace
}  // namespace kvsim
