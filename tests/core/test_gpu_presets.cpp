// The GPU card table (core/src/gpu_presets.cpp): GpuSpec's invariants hold for every preset,
// names are unique and found in any case, the eleven original cards keep their figures, and
// the figures agree with each other where the hardware ties them (FP8 = 2 x BF16).
#include <cctype>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "kvsim/core/model_presets.h"

namespace kvsim {
namespace {

std::string with_case(std::string s, int (*to)(int)) {
  for (char& c : s) c = static_cast<char>(to(static_cast<unsigned char>(c)));
  return s;
}

TEST(GpuPresets, EveryPresetKeepsTheInvariants) {
  std::set<std::string> names;
  for (const GpuSpec& g : gpu_presets()) {
    SCOPED_TRACE(g.name);
    EXPECT_NO_THROW(validate_gpu_spec(g));
    EXPECT_TRUE(names.insert(g.name).second) << "name given twice";
    // Stored lower-case, so that every spelling finds it.
    EXPECT_EQ(g.name, with_case(g.name, ::tolower));
    EXPECT_EQ(&find_gpu_preset(with_case(g.name, ::toupper)), &g);
    EXPECT_GT(g.vram_gib, 0);
    EXPECT_GT(g.hbm_gb_per_s, 0);
    EXPECT_GT(g.interconnect_gb_per_s, 0);
    EXPECT_GE(g.interconnect_latency_us, 0);
    // Every card's BF16 peak is known but the L20's (no vendor figure: gpu_presets.cpp).
    if (g.name != "l20") {
      EXPECT_GT(g.peak_bf16_tflops, 0);
    }
    // Where a card has FP8 tensor cores, their dense rate is twice its BF16 rate (each vendor's
    // tables; the 1% covers the datasheets' rounding).
    if (g.peak_fp8_tflops > 0 && g.peak_bf16_tflops > 0) {
      EXPECT_NEAR(g.peak_fp8_tflops / g.peak_bf16_tflops, 2.0, 0.03);
    }
  }
  EXPECT_EQ(names.size(), gpu_presets().size());
}

TEST(GpuPresets, OriginalCardsKeepTheirFigures) {
  struct Old {
    const char* name;
    double vram_gib, bf16, hbm;
  };
  for (const Old& o :
       {Old{"rtx4090", 24, 165.2, 1008}, Old{"rtx3090", 24, 71.0, 936}, Old{"l4", 24, 121.0, 300},
        Old{"a10", 24, 125.0, 600}, Old{"l40s", 48, 362.05, 864}, Old{"a100-40g", 40, 312.0, 1555},
        Old{"a100-80g", 80, 312.0, 2039}, Old{"h100-pcie", 80, 756.0, 2000},
        Old{"h100-80g", 80, 989.4, 3350}, Old{"h200-141g", 141, 989.4, 4800},
        Old{"mi300x", 192, 1307.4, 5300}}) {
    const GpuSpec& g = find_gpu_preset(o.name);
    EXPECT_EQ(g.vram_gib, o.vram_gib) << o.name;
    EXPECT_EQ(g.peak_bf16_tflops, o.bf16) << o.name;
    EXPECT_EQ(g.hbm_gb_per_s, o.hbm) << o.name;
  }
  // The table's order is the --help order: the original eleven first.
  EXPECT_EQ(gpu_presets()[0].name, "rtx4090");
  EXPECT_EQ(gpu_presets()[10].name, "mi300x");
}

TEST(GpuPresets, CardsPeopleBuyNow) {
  for (const char* name :
       {"rtx-pro-6000", "rtx5090", "b200", "gb200", "h20", "l20", "mi325x", "mi355x"}) {
    EXPECT_NO_THROW(find_gpu_preset(name)) << name;
  }
  EXPECT_EQ(find_gpu_preset("RTX-PRO-6000").vram_gib, 96);
  EXPECT_EQ(find_gpu_preset("B200").peak_fp8_tflops, 4500);
  EXPECT_EQ(find_gpu_preset("mi355x").interconnect_gb_per_s, 1075.2);
  EXPECT_EQ(find_gpu_preset("h100-80g").interconnect_latency_us, 37);
}

TEST(GpuPresets, ValidateNamesTheField) {
  const auto message = [](const GpuSpec& g) {
    try {
      validate_gpu_spec(g);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  GpuSpec g = find_gpu_preset("h100-80g");
  g.vram_gib = 0;
  EXPECT_EQ(message(g), "gpu 'h100-80g': vram_gib must be a finite number > 0 (got 0)");
  g = find_gpu_preset("h100-80g");
  g.hbm_gb_per_s = -1;
  EXPECT_EQ(message(g), "gpu 'h100-80g': hbm_gb_per_s must be a finite number >= 0 (got -1)");
  g = find_gpu_preset("h100-80g");
  g.interconnect_latency_us = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(message(g),
            "gpu 'h100-80g': interconnect_latency_us must be a finite number >= 0 (got nan)");
  g.name.clear();
  EXPECT_EQ(message(g), "gpu: name must not be empty");
}

}  // namespace
}  // namespace kvsim
