#include "kvsim/sim/stats/quantile_sketch.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/core.h>

#include "kvsim/sim/stats/latency_stats.h"

namespace kvsim {

// ---- ExactSum -------------------------------------------------------------------------------

void ExactSum::add_at(size_t limb, uint64_t lo, uint64_t hi) noexcept {
  uint64_t before = limbs_[limb];
  limbs_[limb] += lo;
  uint64_t carry = limbs_[limb] < before ? 1 : 0;
  for (size_t i = limb + 1; i < kLimbs && (hi != 0 || carry != 0); ++i) {
    before = limbs_[i];
    limbs_[i] += hi;
    const uint64_t c1 = limbs_[i] < before ? 1 : 0;
    before = limbs_[i];
    limbs_[i] += carry;
    carry = c1 + (limbs_[i] < before ? 1 : 0);
    hi = 0;
  }
}

void ExactSum::add(double v) {
  // v = m * 2^(b - 1074) with m < 2^53 an integer and b in [0, 2045]: a subnormal has biased
  // exponent 0 and no hidden bit; a normal one with biased exponent e has the hidden bit and
  // b = e - 1.
  const uint64_t bits = std::bit_cast<uint64_t>(v);
  const uint64_t biased = (bits >> 52) & 0x7FF;
  const uint64_t frac = bits & ((uint64_t{1} << 52) - 1);
  const uint64_t m = biased == 0 ? frac : (frac | (uint64_t{1} << 52));
  if (m == 0) return;
  const size_t b = biased == 0 ? 0 : static_cast<size_t>(biased - 1);
  const size_t shift = b % 64;
  add_at(b / 64, m << shift, shift == 0 ? 0 : m >> (64 - shift));
}

void ExactSum::merge(const ExactSum& other) noexcept {
  uint64_t carry = 0;
  for (size_t i = 0; i < kLimbs; ++i) {
    const uint64_t a = limbs_[i];
    const uint64_t s = a + other.limbs_[i];
    const uint64_t c1 = s < a ? 1 : 0;
    limbs_[i] = s + carry;
    carry = c1 + (limbs_[i] < s ? 1 : 0);
  }
}

bool ExactSum::is_zero() const noexcept {
  return std::all_of(limbs_.begin(), limbs_.end(), [](uint64_t l) { return l == 0; });
}

double ExactSum::value() const noexcept {
  size_t top = kLimbs;
  while (top > 0 && limbs_[top - 1] == 0) --top;
  if (top == 0) return 0.0;
  const size_t t = top - 1;
  const size_t len = t * 64 + static_cast<size_t>(64 - std::countl_zero(limbs_[t]));  // bit length
  if (len <= 53) {
    // An integer below 2^53 in units of 2^-1074 is a representable double (subnormal or not).
    return std::ldexp(static_cast<double>(limbs_[0]), -1074);
  }
  // The top 64 bits (bits [len - 64, len), left-aligned when len < 64), and whether anything
  // below them is set.
  uint64_t top64 = 0;
  bool sticky = false;
  if (len < 64) {
    top64 = limbs_[0] << (64 - len);
  } else {
    const size_t p = len - 64;
    const size_t li = p / 64, sh = p % 64;
    top64 = limbs_[li] >> sh;
    if (sh != 0) top64 |= limbs_[li + 1] << (64 - sh);
    if (sh != 0 && (limbs_[li] & ((uint64_t{1} << sh) - 1)) != 0) sticky = true;
    for (size_t i = 0; i < li && !sticky; ++i) sticky = limbs_[i] != 0;
  }
  // Round the 64 bits to 53, to nearest, ties to even.
  uint64_t mant = top64 >> 11;
  const uint64_t rem = top64 & 0x7FF;
  if (rem > 0x400 || (rem == 0x400 && (sticky || (mant & 1) != 0))) ++mant;
  // top64 represents bits [len - 64, len): its unit is 2^(len - 64 - 1074).
  int exp2 = static_cast<int>(len) - 64 + 11 - 1074;
  if (mant == (uint64_t{1} << 53)) {
    mant >>= 1;
    ++exp2;
  }
  // len > 53 puts the result at or above 2^-1021, a normal double: ldexp is exact (or +inf).
  return std::ldexp(static_cast<double>(mant), exp2);
}

// ---- QuantileSketch -------------------------------------------------------------------------

QuantileSketch::QuantileSketch(double relative_accuracy) : alpha_(relative_accuracy) {
  if (!(relative_accuracy > 0.0 && relative_accuracy <= 0.5)) {
    throw std::invalid_argument(fmt::format(
        "quantile sketch relative accuracy must be in (0, 0.5], got {}", relative_accuracy));
  }
  // The margin: the key and the representative are computed with a few ulps of error each (on
  // ln v up to 745 in magnitude, about 1e-13 relative); bucketing for a slightly smaller accuracy
  // keeps the error within alpha itself.
  const double a = alpha_ * (1.0 - 1e-7);
  ln_gamma_ = std::log1p(2.0 * a / (1.0 - a));  // ln((1 + a) / (1 - a))
  const double gamma = (1.0 + a) / (1.0 - a);
  ln_rep_factor_ = std::log(2.0 / (1.0 + gamma));
}

int32_t QuantileSketch::key(double v) const noexcept {
  return static_cast<int32_t>(std::ceil(std::log(v) / ln_gamma_));
}

double QuantileSketch::representative(int32_t k) const noexcept {
  return std::exp(static_cast<double>(k) * ln_gamma_ + ln_rep_factor_);
}

void QuantileSketch::add(double v) {
  if (!(v >= 0.0) || !std::isfinite(v)) {
    throw std::invalid_argument(
        fmt::format("quantile sketch values must be finite and >= 0, got {}", v));
  }
  if (v == 0.0) {
    ++zero_count_;
  } else {
    add_key(key(v), 1);
  }
  min_ = count_ == 0 ? v : std::min(min_, v);
  max_ = count_ == 0 ? v : std::max(max_, v);
  ++count_;
  sum_.add(v);
}

void QuantileSketch::add_key(int32_t k, int64_t n) {
  const bool empty = counts_.empty();
  if (empty || k < offset_ || k >= offset_ + static_cast<int32_t>(counts_.size())) {
    // Re-centre the store on the keys seen plus k, with half their span (+ 16) of room on each
    // side: the length is span + 2 * room <= 2 * span + 33, and the next re-centre needs a key
    // beyond that room, so the span grows by half between re-centres: O(log span) copies of
    // O(span) each, amortised O(1) per add.
    const int32_t new_min = empty ? k : std::min(min_key_, k);
    const int32_t new_max = empty ? k : std::max(max_key_, k);
    const int32_t pad = (new_max - new_min + 1) / 2 + 16;
    const int32_t lo = new_min - pad;
    std::vector<int64_t> grown(static_cast<size_t>(new_max + pad + 1 - lo), 0);
    if (!empty) {  // counts outside [min_key_, max_key_] are 0
      std::copy(counts_.begin() + (min_key_ - offset_), counts_.begin() + (max_key_ - offset_ + 1),
                grown.begin() + (min_key_ - lo));
    }
    counts_ = std::move(grown);
    offset_ = lo;
    if (empty) min_key_ = max_key_ = k;
  }
  counts_[static_cast<size_t>(k - offset_)] += n;
  min_key_ = std::min(min_key_, k);
  max_key_ = std::max(max_key_, k);
}

int64_t QuantileSketch::bucket(int32_t k) const noexcept {
  if (counts_.empty() || k < offset_ || k >= offset_ + static_cast<int32_t>(counts_.size())) {
    return 0;
  }
  return counts_[static_cast<size_t>(k - offset_)];
}

void QuantileSketch::merge(const QuantileSketch& other) {
  if (other.alpha_ != alpha_) {
    throw std::invalid_argument(fmt::format(
        "cannot merge quantile sketches of relative accuracy {} and {}", alpha_, other.alpha_));
  }
  if (other.count_ == 0) return;
  if (&other == this) {
    const QuantileSketch copy = other;
    merge(copy);
    return;
  }
  if (other.min_key_ <= other.max_key_) {
    // Grow once to cover other's key range, then add bucket by bucket.
    add_key(other.min_key_, 0);
    add_key(other.max_key_, 0);
    for (int32_t k = other.min_key_; k <= other.max_key_; ++k) {
      const int64_t n = other.bucket(k);
      if (n != 0) counts_[static_cast<size_t>(k - offset_)] += n;
    }
  }
  min_ = count_ == 0 ? other.min_ : std::min(min_, other.min_);
  max_ = count_ == 0 ? other.max_ : std::max(max_, other.max_);
  count_ += other.count_;
  zero_count_ += other.zero_count_;
  sum_.merge(other.sum_);
}

void QuantileSketch::clear() noexcept {
  count_ = zero_count_ = 0;
  min_ = max_ = 0.0;
  sum_ = ExactSum{};
  counts_.clear();
  counts_.shrink_to_fit();
  offset_ = 0;
  min_key_ = 1;
  max_key_ = 0;
}

double QuantileSketch::quantile(double q) const {
  const int64_t i = nearest_rank_index(q, count_);  // throws on empty / bad q
  if (i == 0) return min_;
  if (i == count_ - 1) return max_;
  if (i < zero_count_) return 0.0;
  int64_t rank = i - zero_count_;  // 0-based rank among the positive values
  for (int32_t k = min_key_; k <= max_key_; ++k) {
    const int64_t n = counts_[static_cast<size_t>(k - offset_)];
    if (rank < n) return std::clamp(representative(k), min_, max_);
    rank -= n;
  }
  // Unreachable while the invariants hold (count_ == zero_count_ + bucket counts).
  throw std::logic_error(fmt::format("quantile sketch: rank {} beyond {} values", i, count_));
}

double QuantileSketch::mean() const noexcept {
  return count_ == 0 ? 0.0 : sum_.value() / static_cast<double>(count_);
}

size_t QuantileSketch::num_buckets() const noexcept {
  return min_key_ <= max_key_ ? static_cast<size_t>(max_key_ - min_key_ + 1) : 0;
}

size_t QuantileSketch::memory_bytes() const noexcept {
  return sizeof(*this) + counts_.capacity() * sizeof(int64_t);
}

bool QuantileSketch::operator==(const QuantileSketch& o) const noexcept {
  if (alpha_ != o.alpha_ || count_ != o.count_ || zero_count_ != o.zero_count_ || min_ != o.min_ ||
      max_ != o.max_ || !(sum_ == o.sum_) || min_key_ != o.min_key_ || max_key_ != o.max_key_) {
    return false;
  }
  for (int32_t k = min_key_; k <= max_key_; ++k) {
    if (bucket(k) != o.bucket(k)) return false;
  }
  return true;
}

void QuantileSketch::check_invariants() const {
  auto fail = [](const std::string& what) {
    throw std::logic_error("quantile sketch invariant broken: " + what);
  };
  int64_t in_buckets = 0;
  for (int64_t n : counts_) {
    if (n < 0) fail("negative bucket count");
    in_buckets += n;
  }
  if (count_ != zero_count_ + in_buckets) {
    fail(fmt::format("count {} != zero count {} + bucket counts {}", count_, zero_count_,
                     in_buckets));
  }
  if (count_ == 0) {
    if (in_buckets != 0 || zero_count_ != 0 || min_ != 0.0 || max_ != 0.0 || !sum_.is_zero()) {
      fail("an empty sketch holds values");
    }
  }
  const bool positives = in_buckets > 0;
  if (positives != (min_key_ <= max_key_)) fail("key range does not match the positive values");
  if (positives) {
    if (min_key_ < offset_ || max_key_ >= offset_ + static_cast<int32_t>(counts_.size())) {
      fail("key range outside the store");
    }
    if (bucket(min_key_) <= 0 || bucket(max_key_) <= 0) fail("empty bucket at a key range end");
    if (counts_.size() > 2 * num_buckets() + 33) {
      fail(fmt::format("store of {} counters for {} keys", counts_.size(), num_buckets()));
    }
    for (int32_t k = offset_; k < offset_ + static_cast<int32_t>(counts_.size()); ++k) {
      if ((k < min_key_ || k > max_key_) && bucket(k) != 0) fail("count outside the key range");
    }
    if (key(max_) != max_key_) fail("max_key is not the key of max");
    if (min_ > 0.0 && key(min_) != min_key_) fail("min_key is not the key of min");
  }
  if (min_ > max_) fail("min > max");
  if (count_ > 0 && (zero_count_ > 0) != (min_ == 0.0)) fail("zero count does not match min");
}

}  // namespace kvsim
