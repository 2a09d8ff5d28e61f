// The roofline's newer terms (all off unless asked for, so default replays are unchanged):
// tensor-parallel all-reduces over a known link, the host time async scheduling overlaps,
// CUDA graph padding of decode batches, and per-request host costs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include "kvsim/sim/engine/step_time_model.h"

#include "step_work_fixture.h"

namespace kvsim {
namespace {

RooflineModelShape llama70b() {
  RooflineModelShape s{"llama-70b", 70e9, 140e9, 80, 64, 128, 2.0 * 80 * 8 * 128 * 2};
  s.hidden_size = 8192;
  return s;
}

RooflineGpu linked(double link_gb_per_s, double latency_us) {
  RooflineGpu g{"h100-80g", 989.4e12, 3.35e12};
  g.interconnect_bytes_per_s = link_gb_per_s * 1e9;
  g.interconnect_latency_s = latency_us * 1e-6;
  return g;
}

TEST(RooflineTerms, AllReducesAreTwoRingsPerLayer) {
  RooflineParams p;
  p.tensor_parallel_size = 4;
  EXPECT_EQ(RooflineStepTime(llama70b(), linked(450, 5), p).comm_seconds(decode_batch(4, 10)),
            0.0);  // off unless asked for
  p.allreduce = true;
  const RooflineStepTime m(llama70b(), linked(450, 5), p);
  const StepWork w = decode_batch(64, 1000);
  // 64 tokens x 8192 x 2 bytes per all-reduce; a ring sends 2 x 3/4 of it over 450 GB/s, plus
  // 5 us of latency; two per layer, 80 layers.
  const double bytes = 64.0 * 8192 * 2;
  const double one = 2.0 * 3 / 4 * bytes / 450e9 + 5e-6;
  EXPECT_DOUBLE_EQ(m.comm_seconds(w), 2 * 80 * one);
  const StepTimeBreakdown b = m.estimate(w);
  EXPECT_DOUBLE_EQ(b.comm_s, 2 * 80 * one);
  EXPECT_DOUBLE_EQ(b.total_s, std::max(b.compute_s, b.memory_s) + b.overhead_s + b.comm_s);
  EXPECT_NE(m.describe().find("all-reduce over 450 GB/s + 5 us"), std::string::npos)
      << m.describe();
  p.allreduce_us = 2;
  EXPECT_DOUBLE_EQ(RooflineStepTime(llama70b(), linked(450, 5), p).comm_seconds(w),
                   2 * 80 * (2.0 * 3 / 4 * bytes / 450e9 + 2e-6));
  p.allreduce_us = -1;
  // TP 1, or an unknown link: no term, and the description says which.
  p.tensor_parallel_size = 1;
  EXPECT_EQ(RooflineStepTime(llama70b(), linked(450, 5), p).comm_seconds(w), 0.0);
  p.tensor_parallel_size = 4;
  const RooflineStepTime unknown(llama70b(), linked(0, 0), p);
  EXPECT_EQ(unknown.comm_seconds(w), 0.0);
  EXPECT_NE(unknown.describe().find("all-reduce not modelled (the card's link is unknown)"),
            std::string::npos);
}

TEST(RooflineTerms, AsyncOverlapsTheHostPart) {
  RooflineParams p;
  p.cpu_ms = 3.0;
  const RooflineStepTime m(llama70b(), linked(0, 0), p);
  const StepWork w = decode_batch(8, 500);
  const StepTimeBreakdown b = m.estimate(w);
  EXPECT_DOUBLE_EQ(b.cpu_s, 3e-3);
  EXPECT_EQ(m.step_time_ns(w, false), std::llround(b.total_s * 1e9));
  EXPECT_EQ(m.step_time_ns(w, true), std::llround(std::max(b.total_s - 3e-3, 3e-3) * 1e9));
  // A host part longer than the GPU's: async waits for the host.
  p.cpu_ms = 500.0;
  const RooflineStepTime slow_host(llama70b(), linked(0, 0), p);
  EXPECT_EQ(slow_host.step_time_ns(w, true), 500'000'000);
}

TEST(RooflineTerms, CudaGraphSizesAndPadding) {
  const std::pair<int64_t, int64_t> sizes[] = {{1, 1},     {2, 2},     {3, 4},    {4, 4},
                                               {5, 8},     {8, 8},     {9, 16},   {17, 24},
                                               {511, 512}, {512, 512}, {513, 513}};
  for (const auto& [t, padded] : sizes) EXPECT_EQ(RooflineStepTime::cuda_graph_size(t), padded);
  RooflineParams p;
  const RooflineStepTime plain(llama70b(), linked(0, 0), p);
  p.cuda_graph_padding = true;
  const RooflineStepTime graphs(llama70b(), linked(0, 0), p);
  // 9 decodes compute as 16; a step with a prefill is not a graph.
  const StepWork w = decode_batch(9, 100);
  EXPECT_DOUBLE_EQ(graphs.flops(w) - plain.flops(w), 2.0 * 70e9 * 7);
  StepWork mixed = decode_batch(9, 100);
  mixed.add_sequence(0, 3, true);
  EXPECT_DOUBLE_EQ(graphs.flops(mixed), plain.flops(mixed));
}

TEST(RooflineTerms, SpecKeysAndRequestOverheads) {
  RooflineModelShape shape = llama70b();
  const std::unique_ptr<StepTimeModel> m = parse_step_time_spec(
      "roofline:v0,cpu_ms=2,cuda_graphs=1,queue_ms=15,token_ms=0.05", shape, linked(0, 0), 1);
  const RequestOverheads o = m->request_overheads();
  EXPECT_DOUBLE_EQ(o.queueing_s, 0.015);
  EXPECT_DOUBLE_EQ(o.per_output_token_s, 5e-5);
  EXPECT_NE(m->describe().find("cpu_ms=2, cuda_graphs=1, queue_ms=15, token_ms=0.05"),
            std::string::npos)
      << m->describe();
  EXPECT_EQ(m->calibration().rfind("uncalibrated: roofline constants not fitted", 0), 0u);
  // v0's description is what `roofline` always was (reports and JSON stay byte-identical).
  EXPECT_EQ(parse_step_time_spec("roofline:v0", shape, linked(0, 0), 1)->describe(),
            "roofline(llama-70b on h100-80g, tp=1, mfu=0.5, mbu=0.8, overhead_ms=1)");
  const std::unique_ptr<StepTimeModel> ar =
      parse_step_time_spec("roofline:v0,allreduce=1,allreduce_us=8", shape, linked(900, 30), 2);
  EXPECT_NE(ar->describe().find("all-reduce over 900 GB/s + 8 us"), std::string::npos)
      << ar->describe();
  for (const char* bad : {"roofline:cuda_graphs=2", "roofline:cpu_ms=-1", "roofline:queue_ms=1e9",
                          "roofline:allreduce=0.5", "roofline:allreduce_us=-2",
                          "roofline:token_ms=x", "roofline:cpu_ms=1,cpu_ms=2"}) {
    EXPECT_THROW(parse_step_time_spec(bad, shape, linked(0, 0), 1), std::invalid_argument) << bad;
  }
}

}  // namespace
}  // namespace kvsim
