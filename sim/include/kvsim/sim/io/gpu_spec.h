// Reads a GPU card from a JSON file (`--gpu-spec FILE`, Python `gpu_spec=`): the card kvsim has
// no preset for.
//
// The file is one JSON object (strict: no repeated key, nothing after it):
//   {"name": "my-card", "vram_gib": 80, "peak_bf16_tflops": 989.4, "hbm_gb_per_s": 3350,
//    "peak_fp8_tflops": 1978.9, "interconnect_gb_per_s": 900, "interconnect_latency_us": 37}
// Required: name (1-64 characters, no control characters), vram_gib or memory_gb (not both),
// peak_bf16_tflops, hbm_gb_per_s. Optional: peak_fp8_tflops, interconnect_gb_per_s,
// interconnect_latency_us (absent: 0, "not known"). Units are GpuSpec's (model_presets.h);
// memory_gb is the vendor's nominal "GB" figure, taken as GiB exactly as the presets take it
// (docs/planner.md), so the two keys mean the same number. Every number given is finite and
// > 0; vram_gib is at most the planner's kMaxVramGib, the others at most kMaxGpuSpecValue. Any
// other key is refused.
//
// Errors throw std::runtime_error as one line naming the file, the line of the key and the key:
//   card.json:3: key 'hbm_gb_per_s': expected a finite number > 0, got -1
//   card.json: key 'peak_bf16_tflops': missing (required)
#pragma once

#include <string>
#include <string_view>

#include "kvsim/core/model_presets.h"

namespace kvsim {

// The bound on every figure but vram_gib (1e9 TFLOP/s, GB/s or microseconds): far above any card,
// low enough that the step-time arithmetic stays finite.
inline constexpr double kMaxGpuSpecValue = 1e9;

// `source` names the input in messages.
GpuSpec parse_gpu_spec(std::string_view json_text, const std::string& source);

// Reads and parses the file at `path` (at most 1 MiB).
GpuSpec load_gpu_spec(const std::string& path);

}  // namespace kvsim
