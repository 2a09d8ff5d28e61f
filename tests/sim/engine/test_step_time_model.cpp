// StepTimeModel: values against hand-computed roofline numbers, monotonicity, spec parsing.
#include <cmath>
#include <stdexcept>
#include <string>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include "kvsim/core/param.h"
#include "kvsim/sim/engine/step_time_model.h"

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

StepWork decode_batch(int batch, int context) {
  StepWork w;
  for (int i = 0; i < batch; ++i) w.add_sequence(context, 1, false);
  return w;
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

TEST(ParseStepTimeSpec, FixedAndRooflineForms) {
  auto fixed = parse_step_time_spec("fixed:10", llama8b(), h100(), 1);
  EXPECT_EQ(fixed->step_time_ns(decode_batch(1, 1)), 10'000'000);

  auto def = parse_step_time_spec("roofline", llama8b(), h100(), 1);
  const auto* r = dynamic_cast<const RooflineStepTime*>(def.get());
  ASSERT_NE(r, nullptr);
  EXPECT_DOUBLE_EQ(r->params().mfu, 0.5);
  EXPECT_DOUBLE_EQ(r->params().mbu, 0.8);
  EXPECT_DOUBLE_EQ(r->params().overhead_ms, 1.0);

  auto tuned = parse_step_time_spec("roofline:overhead_ms=0,mfu=0.4,mbu=0.9", llama8b(), h100(), 2);
  r = dynamic_cast<const RooflineStepTime*>(tuned.get());
  ASSERT_NE(r, nullptr);
  EXPECT_DOUBLE_EQ(r->params().mfu, 0.4);
  EXPECT_DOUBLE_EQ(r->params().mbu, 0.9);
  EXPECT_DOUBLE_EQ(r->params().overhead_ms, 0.0);
  EXPECT_EQ(r->params().tensor_parallel_size, 2);
  EXPECT_EQ(r->describe(),
            "roofline(llama-3.1-8b on h100-80g, tp=2, mfu=0.4, mbu=0.9, overhead_ms=0)");
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
