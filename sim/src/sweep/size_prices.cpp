// kvsim size: the per-GPU-hour price table and --gpu-price overrides.
#include <cmath>
#include <stdexcept>
#include <string>

#include <fmt/core.h>

#include "kvsim/core/model_presets.h"
#include "kvsim/core/param.h"
#include "kvsim/sim/io/parse_number.h"
#include "kvsim/sim/sweep/size.h"

namespace kvsim {

PriceTable default_gpu_prices() {
  // ILLUSTRATIVE on-demand list prices in USD per GPU-hour, one per GPU preset, written down on
  // 2026-12-01 from the order of magnitude of public cloud price pages (single-GPU or per-GPU
  // share of 8-GPU instances, 2025). They are not quotes: prices vary by provider, region,
  // commitment and month, so give your own with --gpu-price NAME=USD. Only their ratios matter
  // for the ranking. A test checks that every preset in core/model_presets has an entry.
  return {
      {"rtx4090", 0.69},  {"rtx3090", 0.43},   {"l4", 0.80},       {"a10", 0.75},
      {"l40s", 1.79},     {"a100-40g", 1.29},  {"a100-80g", 1.79}, {"h100-pcie", 2.49},
      {"h100-80g", 2.99}, {"h200-141g", 3.79}, {"mi300x", 3.49},
  };
}

void apply_gpu_price(PriceTable& prices, std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument(
        fmt::format("{}: {}", param("gpu_price", fmt::format("'{}'", text)), why));
  };
  const auto eq = text.find('=');
  if (eq == std::string_view::npos) throw bad("expected NAME=USD_PER_GPU_HOUR, e.g. h100-80g=2.49");
  std::string name;
  try {
    name = find_gpu_preset(text.substr(0, eq)).name;
  } catch (const std::invalid_argument& e) {
    throw bad(e.what());
  }
  const std::string_view value = text.substr(eq + 1);
  const std::optional<double> price = parse_finite_double(value);
  if (!price || !(*price > 0)) {
    throw bad(fmt::format("price '{}' is not a number > 0", value));
  }
  prices[name] = *price;
}

}  // namespace kvsim
