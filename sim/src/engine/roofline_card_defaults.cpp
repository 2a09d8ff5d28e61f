// Per-card roofline defaults fitted on public measurements (docs/step-time-model.md
// §Per-card defaults, docs/latency-validation.md). A card without an entry keeps the v0
// constants and is labelled uncalibrated.
#include <array>
#include <cmath>

#include "kvsim/sim/engine/step_time_model.h"

namespace kvsim {

namespace {

RooflineParams h100_sxm() {
  // tools/latency_validation/roofline_fit.json "all_runs" (fit_roofline.py; method in its
  // docstring and docs/latency-validation.md): 21 comparable load stages of 13 runs.
  RooflineParams p;
  p.mfu = 0.5;  // not fitted: these runs do not identify it (fit_roofline.py's docstring)
  p.mbu = 0.801;
  p.overhead_ms = 0.675;
  p.seq_us = 0;  // fitted: the data ask for no per-sequence cost
  p.cuda_graph_padding = true;
  p.lm_head = true;
  p.allreduce = true;
  p.allreduce_hop_us = 4.18;
  p.queue_ms = 7.67;
  p.fitted =
      "fitted for h100-80g on 16 public vLLM v0.15.1 H100 SXM runs (calibration/vllm-h100-runs, "
      "tools/latency_validation/fit_roofline.py): median |error| of TTFT/TPOT/E2E means over 21 "
      "load stages 2.0/2.4/2.5 % in-sample, 2.7/2.4/2.4 % leaving each run out of the fit "
      "(docs/latency-validation.md)";
  return p;
}

}  // namespace

const RooflineCardDefaults* roofline_card_defaults(const RooflineGpu& gpu) {
  static const std::array<RooflineCardDefaults, 1> table{{
      {"h100-80g", 989.4e12, 3350e9, h100_sxm()},
  }};
  for (const auto& d : table) {
    // The preset's own numbers (to rounding): a card spec reusing the name with other peaks
    // is another card.
    if (gpu.name == d.gpu && std::abs(gpu.peak_flops / d.peak_flops - 1) < 1e-9 &&
        std::abs(gpu.hbm_bytes_per_s / d.hbm_bytes_per_s - 1) < 1e-9) {
      return &d;
    }
  }
  return nullptr;
}

}  // namespace kvsim
