#include "kvsim/sim/traces/trace_random.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>

#include <fmt/core.h>

#include "kvsim/sim/traces/trace.h"

namespace kvsim {

uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  // SplitMix64 finaliser over seed and stream, so nearby seeds give unrelated streams.
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

int64_t Rng::uniform_int(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  if (span == std::numeric_limits<uint64_t>::max()) return static_cast<int64_t>(engine_());
  const uint64_t n = span + 1;
  // Accept draws below the largest multiple of n so every residue is equally likely.
  const uint64_t limit =
      std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
  uint64_t x = engine_();
  while (x >= limit) x = engine_();
  return lo + static_cast<int64_t>(x % n);
}

double Rng::exponential(double rate) {
  return -std::log(uniform_pos()) / rate;
}

double Rng::normal() {
  const double u1 = uniform_pos();
  const double u2 = uniform01();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double Rng::gamma(double shape) {
  if (!(shape > 0)) throw std::invalid_argument("gamma shape must be > 0");
  if (shape < 1) {
    const double g = gamma(shape + 1);
    return g * std::pow(uniform_pos(), 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x = 0;
    double v = 0;
    do {
      x = normal();
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = uniform_pos();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

int64_t add_gap_ns(int64_t t, double gap_s) {
  const double gap_ns = gap_s * 1e9;
  if (!(gap_ns >= 0) || gap_ns > static_cast<double>(kMaxArrivalNs - t)) {
    throw std::invalid_argument(fmt::format(
        "arrival times exceed 2^62 ns (about 146 years): a gap of {:g} s after {} ns (rate too "
        "low?)",
        gap_s, t));
  }
  return t + std::llround(gap_ns);
}

PoissonArrivals::PoissonArrivals(double rate, uint64_t seed)
    : rate_(rate), rng_(derive_seed(seed, 0)) {
  if (!(rate > 0) || !std::isfinite(rate)) {
    throw std::invalid_argument("Poisson arrivals need a rate > 0 (requests per second)");
  }
}

int64_t PoissonArrivals::next() {
  if (first_) {
    first_ = false;
  } else {
    t_ = add_gap_ns(t_, rng_.exponential(rate_));
  }
  return t_;
}

std::vector<int64_t> poisson_arrivals_ns(size_t n, double rate, uint64_t seed) {
  PoissonArrivals arrivals(rate, seed);
  std::vector<int64_t> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(arrivals.next());
  return out;
}

}  // namespace kvsim
