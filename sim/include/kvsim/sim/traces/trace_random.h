// Seeded random variates for synthetic traces, identical on every run.
//
// std::mt19937_64's output sequence is fixed by the C++ standard, but std::*_distribution
// algorithms are not (libstdc++ and libc++ differ), so every variate here is computed by our own
// code from the raw 64-bit draws. The transcendental functions (log, exp, cos, pow) come from the
// C library: the same binary on the same machine gives identical bytes; another libm could differ
// in the last ulp of a variate, which can change a rounded length or nanosecond now and then.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace kvsim {

// A 64-bit seed for stream `stream` of a run seeded with `seed` (SplitMix64 of both), so that
// e.g. arrivals and lengths use independent streams and changing one leaves the other unchanged.
uint64_t derive_seed(uint64_t seed, uint64_t stream);

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  uint64_t next_u64() { return engine_(); }
  // Uniform on [0, 1) with 53 random bits.
  double uniform01() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Uniform on (0, 1]: safe under log().
  double uniform_pos() { return 1.0 - uniform01(); }
  // Uniform integer in [lo, hi] (lo <= hi), unbiased (rejection on the top range).
  int64_t uniform_int(int64_t lo, int64_t hi);
  // Exponential with the given rate (mean 1/rate).
  double exponential(double rate);
  // Standard normal (Box-Muller, one value per two draws).
  double normal();
  // Gamma(shape, scale 1) by Marsaglia-Tsang; shape < 1 via the u^(1/shape) boost.
  double gamma(double shape);

 private:
  std::mt19937_64 engine_;
};

// t + gap_s seconds, rounded to whole nanoseconds; throws std::invalid_argument when the gap is
// negative or NaN or the sum would exceed kMaxArrivalNs (trace.h; a rate far too low).
int64_t add_gap_ns(int64_t t, double gap_s);

// Arrival times of a Poisson process at `rate` req/s, one at a time: the first 0, each later one
// the previous plus an exponential gap rounded to whole nanoseconds. Throws std::invalid_argument
// for a rate that is not > 0 and finite (constructor) or an arrival beyond kMaxArrivalNs (next).
class PoissonArrivals {
 public:
  PoissonArrivals(double rate, uint64_t seed);
  int64_t next();

 private:
  double rate_;
  Rng rng_;
  int64_t t_ = 0;
  bool first_ = true;
};

// The first n arrivals of PoissonArrivals(rate, seed).
std::vector<int64_t> poisson_arrivals_ns(size_t n, double rate, uint64_t seed);

}  // namespace kvsim
