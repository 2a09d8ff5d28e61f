// A mergeable relative-error quantile sketch (DDSketch-style: Masson, Rim, Lee, VLDB 2019) for
// non-negative latencies, and the exact floating-point sum it carries so that a sketched mean is
// as deterministic as its percentiles. docs/metrics-sketch.md explains the choice and the bounds.
//
// Buckets. With relative accuracy alpha (default 0.5 %), gamma = (1 + a) / (1 - a) for
// a = alpha * (1 - 1e-7) (the margin absorbs the few-ulp error of std::log / std::exp so that the
// bound below holds for alpha itself). A positive value v goes to key k = ceil(ln v / ln gamma),
// the bucket (gamma^(k-1), gamma^k]; the bucket's representative 2 gamma^k / (gamma + 1) is within
// relative error a of every value in it. Zeros are counted apart (zero_count); negative, NaN and
// infinite values are rejected. Keys of all positive finite doubles lie in about
// [-74,500, 71,000] at alpha = 0.5 % (int32), so no collapsing is ever needed: the store is a
// dense array over the range of keys seen, re-centred with room when a key falls outside it. Its
// length is at most 2 * (max_key - min_key + 1) + 33 counters, i.e. ln(max / min) / ln(gamma) + 1
// buckets times two, where max / min is the ratio of the largest and smallest positive values seen:
// for latencies in [1 ns, 2^62 ns] that is at most 4,299 buckets (34 KB of counters, at most twice
// over), whatever the number of values.
//
// Guarantee (nearest rank, the definition of nearest_rank_index in latency_stats.h): for a
// sketch of the multiset S (n = |S| >= 1) and q in [0, 1], quantile(q) returns y with
// |y - x| <= alpha * x where x is sorted(S)[nearest_rank_index(q, n)]. Rank 0 and rank n - 1
// return the exact minimum and maximum, zeros are returned exactly, and every answer lies in
// [min, max].
//
// Merge. merge() adds counters key by key, adds zero counts and exact sums, and takes the min and
// max, so merge(sketch(A), sketch(B)) == sketch(A + B) (operator==: same alpha, count, zero count,
// min, max, exact sum and the same count in every bucket), in any order and any grouping.
//
// Invariants (check_invariants() throws std::logic_error naming the first one broken):
//   count == zero_count + sum of bucket counts; every bucket count >= 0;
//   count == 0  <=> no bucket is non-empty, zero_count == 0, min == max == 0, exact sum == 0;
//   positive values seen <=> min_key <= max_key, and then counts at min_key and max_key are > 0
//     and every non-empty bucket's key is in [min_key, max_key], and the store holds at most
//     2 * (max_key - min_key + 1) + 33 counters;
//   min <= max; zero_count > 0 <=> min == 0 (when count > 0);
//   max_key == key(max) when max > 0, min_key == key(min) when min > 0.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvsim {

// The exact sum of non-negative finite doubles, as a 2,176-bit fixed-point integer in units of
// 2^-1074 (the smallest subnormal), so that addition is exact, associative and commutative: the
// sum does not depend on the order of add() and merge() calls. value() rounds it to the nearest
// double (ties to even); a sum above DBL_MAX gives +inf. Holds up to 2^63 values.
// Invariant: limbs_ is the little-endian binary expansion of the sum.
class ExactSum {
 public:
  void add(double v);  // Precondition: v finite and >= 0 (QuantileSketch checks).
  void merge(const ExactSum& other) noexcept;
  double value() const noexcept;
  bool is_zero() const noexcept;
  bool operator==(const ExactSum&) const = default;

 private:
  static constexpr size_t kLimbs = 34;  // 2046 value bits + 53 mantissa bits + 63 count bits
  void add_at(size_t limb, uint64_t lo, uint64_t hi) noexcept;
  std::array<uint64_t, kLimbs> limbs_{};
};

class QuantileSketch {
 public:
  static constexpr double kDefaultRelativeAccuracy = 0.005;

  // Throws std::invalid_argument unless 0 < relative_accuracy <= 0.5.
  explicit QuantileSketch(double relative_accuracy = kDefaultRelativeAccuracy);

  // Throws std::invalid_argument if v is negative, NaN or infinite (the sketch is unchanged).
  void add(double v);
  // Throws std::invalid_argument if the relative accuracies differ (the sketch is unchanged).
  void merge(const QuantileSketch& other);
  void clear() noexcept;

  // Nearest-rank quantile within the guarantee above. Throws std::invalid_argument if the sketch
  // is empty or q is outside [0, 1].
  double quantile(double q) const;

  double relative_accuracy() const noexcept { return alpha_; }
  int64_t count() const noexcept { return count_; }
  int64_t zero_count() const noexcept { return zero_count_; }
  double min() const noexcept { return min_; }          // 0 when empty
  double max() const noexcept { return max_; }          // 0 when empty
  double sum() const noexcept { return sum_.value(); }  // correctly rounded exact sum
  double mean() const noexcept;                         // sum() / count(), 0 when empty
  // Number of keys between the smallest and largest non-empty bucket (0 if none).
  size_t num_buckets() const noexcept;
  // Bytes held, including the counters' capacity.
  size_t memory_bytes() const noexcept;

  // The key of a positive finite value and the representative value of a key (exposed for tests).
  int32_t key(double v) const noexcept;
  double representative(int32_t k) const noexcept;

  bool operator==(const QuantileSketch& other) const noexcept;
  void check_invariants() const;

 private:
  void add_key(int32_t k, int64_t n);
  int64_t bucket(int32_t k) const noexcept;  // 0 outside the store

  double alpha_;
  double ln_gamma_;       // ln((1 + a) / (1 - a)), a = alpha * (1 - 1e-7)
  double ln_rep_factor_;  // ln(2 / (1 + gamma)): representative(k) = exp(k ln gamma + this)
  int64_t count_ = 0;
  int64_t zero_count_ = 0;
  double min_ = 0.0;
  double max_ = 0.0;
  ExactSum sum_;
  // counts_[i] is the count of key offset_ + i; keys seen lie in [min_key_, max_key_]
  // (min_key_ > max_key_ when no positive value was added).
  std::vector<int64_t> counts_;
  int32_t offset_ = 0;
  int32_t min_key_ = 1;
  int32_t max_key_ = 0;
};

}  // namespace kvsim
