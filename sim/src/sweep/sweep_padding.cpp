// The analytic expectation of last-block padding (see sweep.h for the definitions).
#include <algorithm>
#include <stdexcept>

#include <fmt/core.h>

#include "kvsim/sim/sweep/sweep.h"

namespace kvsim {
namespace {

// sum_{l=1..n} waste(l), waste(l) = (bs - l mod bs) mod bs. A full cycle of bs lengths wastes
// (bs-1) + (bs-2) + ... + 0 = bs(bs-1)/2; the r leftover lengths waste bs-1, ..., bs-r.
int64_t cumulative_waste(int64_t n, int64_t bs) {
  const int64_t q = n / bs;
  const int64_t r = n % bs;
  return q * (bs * (bs - 1) / 2) + r * bs - r * (r + 1) / 2;
}

}  // namespace

PaddingExpectation expected_padding(std::span<const SequenceLengths> requests, int32_t block_size) {
  if (block_size < 1) {
    throw std::invalid_argument(fmt::format("block size must be >= 1, got {}", block_size));
  }
  const int64_t bs = block_size;
  PaddingExpectation e;
  e.uniform_per_seq = static_cast<double>(bs - 1) / 2.0;
  double waste = 0;
  double used = 0;
  double steps = 0;
  for (const SequenceLengths& r : requests) {
    // The step that finishes the prefill holds `input` slots and samples token 1; the decode step
    // for token k holds input + k - 1 slots.
    const int64_t first = std::max<int64_t>(r.input_tokens, 1);
    const int64_t last =
        std::max<int64_t>(r.input_tokens + std::max<int64_t>(r.output_tokens, 1) - 1, first);
    const int64_t w = cumulative_waste(last, bs) - cumulative_waste(first - 1, bs);
    const int64_t tokens = (first + last) * (last - first + 1) / 2;
    waste += static_cast<double>(w);
    used += static_cast<double>(tokens + w);
    steps += static_cast<double>(last - first + 1);
  }
  if (steps > 0) e.per_seq = waste / steps;
  if (used > 0) e.fraction = waste / used;
  return e;
}

}  // namespace kvsim
