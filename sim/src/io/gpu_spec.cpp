// --gpu-spec FILE -> GpuSpec.
#include "kvsim/sim/io/gpu_spec.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <stdexcept>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "kvsim/core/planner.h"
#include "kvsim/sim/io/line_reader.h"
#include "kvsim/sim/io/strict_json.h"

namespace kvsim {
namespace {

using nlohmann::json;

// A card file is a few lines; the limit stops /dev/zero or a wrong path early.
constexpr int64_t kMaxGpuSpecBytes = int64_t{1} << 20;
constexpr size_t kMaxNameChars = 64;

constexpr const char* kKnownKeys =
    "name, vram_gib or memory_gb, peak_bf16_tflops, hbm_gb_per_s, peak_fp8_tflops, "
    "interconnect_gb_per_s, interconnect_latency_us";

class SpecReader {
 public:
  SpecReader(const json& obj, std::string_view text, std::string source)
      : obj_(obj), text_(text), source_(std::move(source)) {}

  bool has(const char* key) const { return obj_.contains(key); }

  // A finite number in (0, max].
  double number(const char* key, double max) const {
    const json& v = obj_.at(key);
    if (!v.is_number()) fail(key, fmt::format("expected a finite number > 0, got {}", v.dump()));
    const double d = v.get<double>();
    if (!std::isfinite(d) || d <= 0) {
      fail(key, fmt::format("expected a finite number > 0, got {}", v.dump()));
    }
    if (d > max)
      fail(key, fmt::format("{} is above the largest accepted value {:g}", v.dump(), max));
    return d;
  }

  double required(const char* key, double max) const {
    if (!has(key)) fail(key, "missing (required)");
    return number(key, max);
  }

  double optional(const char* key) const { return has(key) ? number(key, kMaxGpuSpecValue) : 0; }

  std::string name() const {
    if (!has("name")) fail("name", "missing (required)");
    const json& v = obj_.at("name");
    const std::string what =
        fmt::format("expected a string of 1 to {} characters without control characters, got {}",
                    kMaxNameChars, v.dump());
    if (!v.is_string()) fail("name", what);
    const std::string s = v.get<std::string>();
    if (s.empty() || s.size() > kMaxNameChars) fail("name", what);
    for (unsigned char c : s) {
      if (c < 0x20 || c == 0x7f) fail("name", what);
    }
    return s;
  }

  [[noreturn]] void fail(std::string_view key, const std::string& what) const {
    const size_t pos = text_.find(fmt::format("\"{}\"", key));
    std::string where = source_;
    if (pos != std::string_view::npos) {
      int64_t line = 1;
      for (size_t i = 0; i < pos; ++i) line += text_[i] == '\n' ? 1 : 0;
      where = fmt::format("{}:{}", source_, line);
    }
    throw std::runtime_error(fmt::format("{}: key '{}': {}", where, key, what));
  }

 private:
  const json& obj_;
  std::string_view text_;
  std::string source_;
};

}  // namespace

GpuSpec parse_gpu_spec(std::string_view json_text, const std::string& source) {
  const json root = parse_strict_json(json_text, source);
  if (!root.is_object()) {
    throw std::runtime_error(fmt::format("{}: expected a JSON object with the keys {}, got {}",
                                         source, kKnownKeys,
                                         root.is_array() ? "an array" : root.dump()));
  }
  const SpecReader r(root, json_text, source);
  for (const auto& [key, value] : root.items()) {
    (void)value;
    static constexpr const char* kKeys[] = {"name",
                                            "vram_gib",
                                            "memory_gb",
                                            "peak_bf16_tflops",
                                            "hbm_gb_per_s",
                                            "peak_fp8_tflops",
                                            "interconnect_gb_per_s",
                                            "interconnect_latency_us"};
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known) r.fail(key, fmt::format("unknown key (expected {})", kKnownKeys));
  }
  GpuSpec g;
  g.name = r.name();
  if (r.has("vram_gib") && r.has("memory_gb")) {
    r.fail("memory_gb", "give vram_gib or memory_gb, not both");
  }
  if (!r.has("vram_gib") && !r.has("memory_gb")) {
    r.fail("vram_gib", "missing (required; or give memory_gb)");
  }
  g.vram_gib = r.required(r.has("vram_gib") ? "vram_gib" : "memory_gb", kMaxVramGib);
  g.peak_bf16_tflops = r.required("peak_bf16_tflops", kMaxGpuSpecValue);
  g.hbm_gb_per_s = r.required("hbm_gb_per_s", kMaxGpuSpecValue);
  g.peak_fp8_tflops = r.optional("peak_fp8_tflops");
  g.interconnect_gb_per_s = r.optional("interconnect_gb_per_s");
  g.interconnect_latency_us = r.optional("interconnect_latency_us");
  validate_gpu_spec(g);  // holds by construction; the header's invariants in one place
  return g;
}

GpuSpec load_gpu_spec(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw std::runtime_error(fmt::format("{}: is a directory, not a GPU spec JSON file", path));
  }
  InputLimits limits;
  limits.max_bytes = kMaxGpuSpecBytes;
  limits.max_line_bytes = 0;
  limits.has_flags = false;
  return parse_gpu_spec(read_text_file(path, limits), path);
}

}  // namespace kvsim
