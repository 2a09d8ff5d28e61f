// The compiled-in GPU card table and GpuSpec's invariant check.
//
// Every figure is the vendor's (datasheet, spec page or architecture whitepaper), per GPU, dense
// (no 2:4 sparsity: where a vendor quotes only sparse FLOP/s the value is half of it, and the
// comment says so). Memory is the vendor's nominal figure, read as GiB as the planner always has
// (docs/planner.md, "Card memory"). Interconnect bandwidth is the vendor's per-GPU figure for
// both directions together; a card with no GPU-to-GPU link gets its PCIe slot's (x16: Gen4
// 64 GB/s, Gen5 128 GB/s, as NVIDIA's L4/L40S/H100 datasheets state them). The all-reduce
// latency is measured, not a vendor figure: the median of an 8-GPU NCCL all-reduce of 2 KiB in
// Vidur's published profiles (calibration/vidur/network/*/all_reduce.csv); 0 where no
// measurement is at hand. A 0 anywhere means "not known" (for FP8: the card has none).
// docs/planner.md's card table repeats these sources with the pages the figures were read on.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "kvsim/core/model_presets.h"

namespace kvsim {
namespace {

struct Card {
  const char* name;
  double vram_gib;
  double bf16_tflops;
  double fp8_tflops;
  double hbm_gb_per_s;
  double link_gb_per_s;
  double all_reduce_us;
};

// clang-format off
constexpr Card kCards[] = {
    // name          GiB  BF16     FP8      GB/s  link GB/s  all-reduce us
    // NVIDIA Ada Lovelace whitepaper, RTX 4090: tensor FLOP/s with FP32 accumulate, dense
    // (FP8 330.3 / 660.6 sparse); PCIe Gen4 x16, no NVLink.
    {"rtx4090",      24,  165.2,   330.3,   1008, 64,     0},
    // NVIDIA Ampere GA102 whitepaper, RTX 3090: no FP8 tensor cores; PCIe Gen4 x16 (its NVLink
    // bridge joins a pair only: 112.5 GB/s).
    {"rtx3090",      24,  71.0,    0,       936,  64,     0},
    // NVIDIA L4 datasheet: BF16 242 and FP8 485 sparse, halved; PCIe Gen4 x16 64 GB/s.
    {"l4",           24,  121.0,   242.5,   300,  64,     0},
    // NVIDIA A10 datasheet: BF16 250 sparse, halved; no FP8; PCIe Gen4 64 GB/s.
    {"a10",          24,  125.0,   0,       600,  64,     0},
    // NVIDIA L40S datasheet: BF16 362.05 and FP8 733 dense (733 / 1,466 sparse); PCIe Gen4 x16
    // 64 GB/s bidirectional.
    {"l40s",         48,  362.05,  733.0,   864,  64,     0},
    // NVIDIA A100 datasheet, SXM: BF16 312 dense, no FP8, NVLink 600 GB/s. All-reduce: Vidur's
    // a100_dgx, 8 GPUs, 2 KiB: 0.062 ms (the DGX A100's memory size is not stated there).
    {"a100-40g",     40,  312.0,   0,       1555, 600,    62},
    {"a100-80g",     80,  312.0,   0,       2039, 600,    62},
    // NVIDIA H100 whitepaper / datasheet, PCIe: BF16 756, FP8 1,513 dense (3,026 sparse);
    // PCIe Gen5 128 GB/s (its NVLink bridge, 600 GB/s, joins a pair only).
    {"h100-pcie",    80,  756.0,   1513.0,  2000, 128,    0},
    // NVIDIA H100 whitepaper, SXM5: BF16 989.4, FP8 1,978.9 dense (3,957.8 sparse); NVLink
    // 900 GB/s. All-reduce: Vidur's h100_dgx, 8 GPUs, 2 KiB: 0.037 ms.
    {"h100-80g",     80,  989.4,   1978.9,  3350, 900,    37},
    // NVIDIA H200 datasheet, SXM: the H100 SXM5's tensor cores (FP8 3,958 sparse); NVLink
    // 900 GB/s.
    {"h200-141g",    141, 989.4,   1978.9,  4800, 900,    0},
    // AMD Instinct MI300X datasheet: FP16/BF16 1,307.4 and FP8 2,614.9 dense; Infinity Fabric
    // 896 GB/s (seven links).
    {"mi300x",       192, 1307.4,  2614.9,  5300, 896,    0},
    // NVIDIA RTX PRO 6000 Blackwell (Workstation Edition) datasheet: 96 GB GDDR7, 1,792 GB/s,
    // 4,000 AI TOPS (FP4, sparse). Dense BF16 503.8 and FP8 1,007.6 (2,015 sparse) as tabulated
    // from NVIDIA's figures by hmc-tech.com (= 4,030 sparse FP4 / 8 and / 4); PCIe Gen5 x16.
    {"rtx-pro-6000", 96,  503.8,   1007.6,  1792, 128,    0},
    // NVIDIA RTX Blackwell GPU architecture whitepaper, GeForce RTX 5090: 32 GB GDDR7,
    // 1,792 GB/s; BF16 209.5 and FP8 419 dense with FP32 accumulate (838 / 1,676 sparse; 419 and
    // 838 dense with FP16 accumulate); PCIe Gen5 x16.
    {"rtx5090",      32,  209.5,   419.0,   1792, 128,    0},
    // NVIDIA DGX B200 datasheet, per GPU (the 8-GPU figures / 8): 1,440 GB HBM3e -> 180,
    // 64 TB/s -> 8,000 GB/s, FP8 72 PFLOPS sparse -> 4,500 dense, NVLink 14.4 TB/s -> 1,800.
    // BF16 2,250 dense (4,500 sparse): NVIDIA's HGX B200 figures (1,000 W).
    {"b200",         180, 2250.0,  4500.0,  8000, 1800,   0},
    // NVIDIA GB200 NVL72 spec, per GPU (the 72-GPU figures / 72): 13.4 TB HBM3e -> 186 GB,
    // 576 TB/s -> 8,000 GB/s, NVLink 130 TB/s -> 1,800 GB/s; FP8 720 PFLOPS sparse -> 5,000
    // dense, BF16 2,500 dense (the 1,200 W B200 of a GB200 superchip).
    {"gb200",        186, 2500.0,  5000.0,  8000, 1800,   0},
    // NVIDIA HGX H20 (China-market Hopper; NVIDIA's spec sheet as published in the press, not
    // on nvidia.com): 96 GB HBM3, 4.0 TB/s, FP8 296 and FP16/BF16 148 TFLOPS dense, NVLink
    // 900 GB/s.
    {"h20",          96,  148.0,   296.0,   4000, 900,    0},
    // NVIDIA L20 (China-market Ada, AD102): 48 GB GDDR6, 864 GB/s, PCIe Gen4 x16. Its BF16 and
    // FP8 tensor peaks were not found in any vendor source: 0 (not known), so the roofline step
    // time refuses this card; give the figures with --gpu-spec FILE.
    {"l20",          48,  0,       0,       864,  64,     0},
    // AMD Instinct MI325X spec page: 256 GB HBM3E, 6 TB/s, FP16/BF16 1,307.4 and FP8 2,614.9
    // dense (5,229.8 sparse); the MI300X's seven Infinity Fabric links, 896 GB/s.
    {"mi325x",       256, 1307.4,  2614.9,  6000, 896,    0},
    // AMD Instinct MI355X: 288 GB HBM3E, 8 TB/s; FP8 5,033.2 dense = 256 CUs x 8,192 FLOP per CU
    // per clock x 2.4 GHz (AMD's ISSCC 2026 and Hot Chips 2025 figures; AMD quotes "5 PF"),
    // BF16 half of it (2,516.6; AMD quotes "2.5 PF"); Infinity Fabric 7 links x 153.6 GB/s.
    {"mi355x",       288, 2516.6,  5033.2,  8000, 1075.2, 0},
};
// clang-format on

std::vector<GpuSpec> make_gpu_presets() {
  std::vector<GpuSpec> out;
  for (const Card& c : kCards) {
    GpuSpec g;
    g.name = c.name;
    g.vram_gib = c.vram_gib;
    g.peak_bf16_tflops = c.bf16_tflops;
    g.hbm_gb_per_s = c.hbm_gb_per_s;
    g.peak_fp8_tflops = c.fp8_tflops;
    g.interconnect_gb_per_s = c.link_gb_per_s;
    g.interconnect_latency_us = c.all_reduce_us;
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace

std::span<const GpuSpec> gpu_presets() {
  static const std::vector<GpuSpec> presets = make_gpu_presets();
  return presets;
}

void validate_gpu_spec(const GpuSpec& g) {
  if (g.name.empty()) throw std::invalid_argument("gpu: name must not be empty");
  const auto check = [&](double v, const char* field, bool positive) {
    if (!std::isfinite(v) || v < 0 || (positive && v == 0)) {
      throw std::invalid_argument(fmt::format("gpu '{}': {} must be a finite number {} 0 (got {})",
                                              g.name, field, positive ? ">" : ">=", v));
    }
  };
  check(g.vram_gib, "vram_gib", true);
  check(g.peak_bf16_tflops, "peak_bf16_tflops", false);
  check(g.hbm_gb_per_s, "hbm_gb_per_s", false);
  check(g.peak_fp8_tflops, "peak_fp8_tflops", false);
  check(g.interconnect_gb_per_s, "interconnect_gb_per_s", false);
  check(g.interconnect_latency_us, "interconnect_latency_us", false);
}

}  // namespace kvsim
