#include "kvsim/sim/traces/trace_gen.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <stdexcept>

#include <fmt/core.h>

#include "kvsim/core/param.h"
#include "kvsim/sim/io/parse_number.h"
#include "kvsim/sim/traces/trace_random.h"

namespace kvsim {
namespace {

constexpr int64_t kMaxZipf = 1 << 20;
// 16.8 M requests: about 2 GiB of records in memory before the file is written, checked before
// anything is generated (a larger -n grew until memory ran out).
constexpr int64_t kMaxRequests = int64_t{1} << 24;
// Gamma gaps: cv outside this range is a typo, and its shape 1/cv^2 would underflow/overflow.
constexpr double kMinCv = 1e-3;
constexpr double kMaxCv = 1e3;
// Shared-prefix content (hash ids or token ids, summed over the trace and the group prompts): 2^28
// elements (2 GiB of hash ids). More is not a trace anyone can replay; fail fast instead of
// allocating for minutes.
constexpr int64_t kMaxGeneratedElements = int64_t{1} << 28;

// Random streams (derive_seed's second argument).
enum Stream : uint64_t {
  ARRIVALS = 1,
  INPUT = 2,
  OUTPUT = 3,
  GROUPS = 4,
  PRIORITY = 5,
  TOKENS = 6
};
constexpr uint64_t kGroupTokensStream = 1000;  // + group index

[[noreturn]] void bad_spec(std::string_view spec, std::string_view why) {
  throw std::invalid_argument(fmt::format(
      "length distribution '{}': {} (expected fixed:N, uniform:LO,HI, normal:MEAN,SIGMA, "
      "lognormal:MU,SIGMA, zipf:S,MAX or empirical:PATH)",
      spec, why));
}

std::vector<double> parse_numbers(std::string_view spec, std::string_view args, size_t count) {
  std::vector<double> out;
  while (true) {
    const size_t comma = args.find(',');
    const std::string_view part = args.substr(0, comma);
    const std::optional<double> v = parse_finite_double(part);
    if (!v) bad_spec(spec, fmt::format("'{}' is not a number", part));
    out.push_back(*v);
    if (comma == std::string_view::npos) break;
    args.remove_prefix(comma + 1);
  }
  if (out.size() != count) bad_spec(spec, fmt::format("needs {} number(s)", count));
  return out;
}

// Draws lengths for one distribution from its own stream, clipped to [1, max_length].
class LengthSampler {
 public:
  LengthSampler(const LengthDist& d, uint64_t seed, const std::vector<int32_t>* empirical,
                int64_t max_length)
      : d_(d), rng_(seed), empirical_(empirical), max_length_(max_length) {
    if (d.kind == LengthDist::Kind::ZIPF) {
      const auto n = static_cast<size_t>(d.b);
      cdf_.resize(n);
      double sum = 0;
      for (size_t k = 0; k < n; ++k) {
        sum += std::pow(static_cast<double>(k + 1), -d.a);
        cdf_[k] = sum;
      }
      for (auto& c : cdf_) c /= sum;
    }
  }
  // The index drawn by the last EMPIRICAL sample (for joint input/output resampling).
  size_t last_index() const { return last_index_; }

  int32_t sample() {
    switch (d_.kind) {
      case LengthDist::Kind::FIXED:
        return clip_length(d_.a);
      case LengthDist::Kind::UNIFORM:
        return clip_length(static_cast<double>(
            rng_.uniform_int(static_cast<int64_t>(d_.a), static_cast<int64_t>(d_.b))));
      case LengthDist::Kind::NORMAL:
        return clip_length(d_.a + d_.b * rng_.normal());
      case LengthDist::Kind::LOGNORMAL:
        return clip_length(std::exp(d_.a + d_.b * rng_.normal()));
      case LengthDist::Kind::ZIPF: {
        const double u = rng_.uniform01();
        const auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
        const auto k = std::min<size_t>(static_cast<size_t>(it - cdf_.begin()), cdf_.size() - 1);
        return clip_length(static_cast<double>(k + 1));
      }
      case LengthDist::Kind::EMPIRICAL:
        return from_index(
            static_cast<size_t>(rng_.uniform_int(0, static_cast<int64_t>(empirical_->size()) - 1)));
    }
    return 1;
  }
  int32_t from_index(size_t i) {
    last_index_ = i;
    return clip_length((*empirical_)[i]);
  }
  // Draws that fell outside [1, max_length] and were clipped.
  int64_t clipped() const { return clipped_; }

 private:
  int32_t clip_length(double v) {
    const double r = std::isnan(v) ? 0.0 : std::nearbyint(v);
    const double c = std::clamp<double>(r, 1.0, static_cast<double>(max_length_));
    clipped_ += c != r ? 1 : 0;
    return static_cast<int32_t>(c);
  }

  LengthDist d_;
  Rng rng_;
  const std::vector<int32_t>* empirical_;
  std::vector<double> cdf_;
  size_t last_index_ = 0;
  int64_t max_length_;
  int64_t clipped_ = 0;
};

// The share of a normal or lognormal distribution's draws that round outside [1, max_length]
// (0 for the other kinds: fixed and uniform are checked exactly, zipf and empirical are only
// counted).
double clipped_share(const LengthDist& d, int64_t max_length) {
  const auto phi = [](double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); };
  // Rounded draws below 1 are those under 0.5, above the maximum those from max + 0.5.
  double lo = 0.5;
  double hi = static_cast<double>(max_length) + 0.5;
  if (d.kind == LengthDist::Kind::LOGNORMAL) {
    lo = std::log(lo);
    hi = std::log(hi);
  } else if (d.kind != LengthDist::Kind::NORMAL) {
    return 0.0;
  }
  if (d.b == 0) return d.a < lo || d.a >= hi ? 1.0 : 0.0;
  return phi((lo - d.a) / d.b) + (1.0 - phi((hi - d.a) / d.b));
}

void check_clipped_share(std::string_view id, const LengthDist& d, int64_t max_length) {
  const double share = clipped_share(d, max_length);
  if (share <= kMaxClippedShare) return;
  const bool normal = d.kind == LengthDist::Kind::NORMAL;
  throw std::invalid_argument(fmt::format(
      "{}: {:.0f} % of the draws would fall outside [1, {}] and be clipped (at most {:.0f} % may "
      "be; a mean{} inside the range with a smaller SIGMA fits)",
      param(id, fmt::format("{}:{:g},{:g}", normal ? "normal" : "lognormal", d.a, d.b)),
      100 * share, max_length, 100 * kMaxClippedShare, normal ? "" : " of ln L"));
}

std::string too_much_prefix_content(const TraceGenOptions& o, int64_t requests) {
  const bool hash_ids = o.prefix_encoding == PrefixEncoding::HASH_IDS;
  return fmt::format(
      "the shared-prefix content of {} requests exceeds the generator's limit of {} {} (lower "
      "{}, {} or {}{})",
      requests, kMaxGeneratedElements, hash_ids ? "hash ids" : "token ids", param("num_requests"),
      param("input_len"), param("prefix_tokens"),
      hash_ids ? ", or raise " + param("hash_block_size") : "");
}

void validate(const TraceGenOptions& o) {
  const auto check = [](bool ok, const std::string& msg) {
    if (!ok) throw std::invalid_argument(msg);
  };
  check(o.num_requests >= 1 && o.num_requests <= kMaxRequests,
        fmt::format("{} must be in [1, {}] (got {})", param("num_requests"), kMaxRequests,
                    o.num_requests));
  const bool needs_rate = o.arrival == GenArrival::POISSON || o.arrival == GenArrival::GAMMA ||
                          o.arrival == GenArrival::CONSTANT;
  check(!needs_rate || (o.rate > 0 && std::isfinite(o.rate)),
        fmt::format("{} must be > 0 requests per second (got {})", param("rate"), o.rate));
  check(o.arrival != GenArrival::GAMMA || (o.cv >= kMinCv && o.cv <= kMaxCv),
        fmt::format("{} must be in [{:g}, {:g}] (got {:g})", param("cv"), kMinCv, kMaxCv, o.cv));
  check(o.arrival != GenArrival::BURST ||
            (o.burst_size >= 1 && o.burst_period_s > 0 && std::isfinite(o.burst_period_s) &&
             o.burst_period_s * 1e9 >= 0.5),
        fmt::format("burst arrivals need {} >= 1 and {} >= 1 ns (got {}, {})", param("burst_size"),
                    param("burst_period"), o.burst_size, o.burst_period_s));
  // Checked before the prefix arithmetic below divides by it.
  check(o.hash_block_size >= 1,
        fmt::format("{} must be >= 1 (got {})", param("hash_block_size"), o.hash_block_size));
  check(o.vocab_size >= 1, param("vocab_size") + " must be >= 1");
  check(o.prefix_groups >= 0 && o.prefix_tokens >= 0,
        param("prefix_groups") + " and " + param("prefix_tokens") + " must be >= 0");
  check(o.prefix_groups == 0 || o.prefix_tokens > 0,
        param("prefix_groups") + " needs " + param("prefix_tokens") + " > 0");
  if (o.prefix_groups > 0) {
    // Every prompt is the prefix plus >= 1 drawn input token, at most kMaxGeneratedLength.
    check(o.prefix_tokens < kMaxGeneratedLength,
          fmt::format("{} must be < {} (the longest generated prompt; got {})",
                      param("prefix_tokens"), kMaxGeneratedLength, o.prefix_tokens));
    // Fixed and uniform lengths cannot be clipped silently: their largest value must fit.
    const LengthDist& in = o.input;
    const bool bounded = in.kind == LengthDist::Kind::FIXED || in.kind == LengthDist::Kind::UNIFORM;
    const double longest = in.kind == LengthDist::Kind::FIXED ? in.a : in.b;
    check(!bounded || longest + o.prefix_tokens <= kMaxGeneratedLength,
          fmt::format("{} + {} up to {:.0f} = {:.0f} tokens exceeds the longest generated "
                      "prompt ({} tokens)",
                      param("prefix_tokens", std::to_string(o.prefix_tokens)), param("input_len"),
                      longest, longest + o.prefix_tokens, kMaxGeneratedLength));
    // The least content every request gets (its input is >= 1 token, or exactly N for fixed:N);
    // generate_trace() also checks the running total, for the distributions.
    const bool hash_ids = o.prefix_encoding == PrefixEncoding::HASH_IDS;
    const int64_t least_prompt =
        o.prefix_tokens + (in.kind == LengthDist::Kind::FIXED ? static_cast<int64_t>(in.a) : 1);
    const int64_t least_elements =
        hash_ids ? (least_prompt + o.hash_block_size - 1) / o.hash_block_size : least_prompt;
    check(o.num_requests <= kMaxGeneratedElements / least_elements,
          too_much_prefix_content(o, o.num_requests));
    if (!hash_ids) {
      check(int64_t{o.prefix_groups} * o.prefix_tokens <= kMaxGeneratedElements,
            fmt::format("{} x {} token ids exceed the generator's limit of {}",
                        param("prefix_groups", std::to_string(o.prefix_groups)),
                        param("prefix_tokens", std::to_string(o.prefix_tokens)),
                        kMaxGeneratedElements));
    }
  }
  check(o.priority_levels >= 1, param("priority_levels") + " must be >= 1");
  const int64_t prefix = o.prefix_groups > 0 ? o.prefix_tokens : 0;
  check_clipped_share("input_len", o.input, kMaxGeneratedLength - prefix);
  check_clipped_share("output_len", o.output, kMaxGeneratedLength);
}

std::vector<int64_t> arrivals(const TraceGenOptions& o) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(o.num_requests));
  Rng rng(derive_seed(o.seed, ARRIVALS));
  int64_t t = 0;
  const double shape = 1.0 / (o.cv * o.cv);
  const int64_t period_ns = add_gap_ns(0, o.burst_period_s);
  for (int64_t i = 0; i < o.num_requests; ++i) {
    switch (o.arrival) {
      case GenArrival::POISSON:
        if (i > 0) t = add_gap_ns(t, rng.exponential(o.rate));
        break;
      case GenArrival::GAMMA:
        if (i > 0) t = add_gap_ns(t, rng.gamma(shape) / (o.rate * shape));
        break;
      case GenArrival::CONSTANT:
        t = add_gap_ns(0, static_cast<double>(i) / o.rate);
        break;
      case GenArrival::BURST:
        if (__builtin_mul_overflow(i / o.burst_size, period_ns, &t) || t > kMaxArrivalNs) {
          throw std::invalid_argument("burst arrivals exceed 2^62 ns (about 146 years)");
        }
        break;
      case GenArrival::ALL_AT_ONCE:
        t = 0;
        break;
    }
    out.push_back(t);
  }
  return out;
}

std::vector<int32_t> empirical_lengths(const std::string& path, bool input) {
  const Trace t = read_trace(path);
  std::vector<int32_t> out;
  out.reserve(t.requests.size());
  for (const auto& r : t.requests) out.push_back(input ? r.input_tokens : r.output_tokens);
  if (out.empty()) throw std::invalid_argument(fmt::format("{}: no requests to resample", path));
  return out;
}

}  // namespace

LengthDist parse_length_dist(std::string_view spec) {
  const size_t colon = spec.find(':');
  if (colon == std::string_view::npos) bad_spec(spec, "missing ':'");
  const std::string_view kind = spec.substr(0, colon);
  const std::string_view args = spec.substr(colon + 1);
  LengthDist d;
  if (kind == "empirical") {
    if (args.empty()) bad_spec(spec, "missing path");
    d.kind = LengthDist::Kind::EMPIRICAL;
    d.path = std::string(args);
    return d;
  }
  if (kind == "fixed") {
    d.kind = LengthDist::Kind::FIXED;
    d.a = parse_numbers(spec, args, 1)[0];
    if (d.a < 1 || d.a > kMaxGeneratedLength || d.a != std::floor(d.a)) {
      bad_spec(spec, fmt::format("N must be an integer in [1, {}]", kMaxGeneratedLength));
    }
    return d;
  }
  if (kind != "uniform" && kind != "normal" && kind != "lognormal" && kind != "zipf") {
    bad_spec(spec, fmt::format("unknown kind '{}'", kind));
  }
  const auto v = parse_numbers(spec, args, 2);
  d.a = v[0];
  d.b = v[1];
  if (kind == "uniform") {
    d.kind = LengthDist::Kind::UNIFORM;
    if (d.a != std::floor(d.a) || d.b != std::floor(d.b) || d.a < 1 || d.b < d.a ||
        d.b > kMaxGeneratedLength) {
      bad_spec(spec, fmt::format("needs integers 1 <= LO <= HI <= {}", kMaxGeneratedLength));
    }
  } else if (kind == "normal" || kind == "lognormal") {
    d.kind = kind == "normal" ? LengthDist::Kind::NORMAL : LengthDist::Kind::LOGNORMAL;
    if (d.b < 0) bad_spec(spec, "SIGMA must be >= 0");
  } else {
    d.kind = LengthDist::Kind::ZIPF;
    if (d.a <= 0 || d.b < 1 || d.b > kMaxZipf || d.b != std::floor(d.b)) {
      bad_spec(spec, fmt::format("needs S > 0 and an integer 1 <= MAX <= {}", kMaxZipf));
    }
  }
  return d;
}

GenArrival parse_gen_arrival(std::string_view name) {
  if (name == "poisson") return GenArrival::POISSON;
  if (name == "gamma") return GenArrival::GAMMA;
  if (name == "constant") return GenArrival::CONSTANT;
  if (name == "burst") return GenArrival::BURST;
  if (name == "all-at-once") return GenArrival::ALL_AT_ONCE;
  throw std::invalid_argument(fmt::format(
      "unknown arrival process '{}' (expected poisson|gamma|constant|burst|all-at-once)", name));
}

std::vector<TraceRequest> generate_trace(const TraceGenOptions& o, GenClipped* clipped) {
  validate(o);
  using Kind = LengthDist::Kind;
  std::vector<int32_t> input_pool;
  std::vector<int32_t> output_pool;
  if (o.input.kind == Kind::EMPIRICAL) input_pool = empirical_lengths(o.input.path, true);
  if (o.output.kind == Kind::EMPIRICAL) output_pool = empirical_lengths(o.output.path, false);
  // Both lengths from the same file: resample whole rows, keeping their input/output pairing.
  const bool joint = o.input.kind == Kind::EMPIRICAL && o.output.kind == Kind::EMPIRICAL &&
                     o.input.path == o.output.path;

  // Input draws leave room for the shared prefix (validate() made sure fixed/uniform fit).
  const int64_t prefix = o.prefix_groups > 0 ? o.prefix_tokens : 0;
  LengthSampler input(o.input, derive_seed(o.seed, INPUT), &input_pool,
                      kMaxGeneratedLength - prefix);
  LengthSampler output(o.output, derive_seed(o.seed, OUTPUT), &output_pool, kMaxGeneratedLength);
  int64_t elements = 0;  // shared-prefix content generated so far (kMaxGeneratedElements)
  Rng group_rng(derive_seed(o.seed, GROUPS));
  Rng priority_rng(derive_seed(o.seed, PRIORITY));
  Rng token_rng(derive_seed(o.seed, TOKENS));

  const bool groups = o.prefix_groups > 0;
  const int64_t bs = o.hash_block_size;
  const int64_t prefix_blocks = o.prefix_tokens / bs;  // full blocks a group shares
  uint64_t next_unique_id =
      static_cast<uint64_t>(o.prefix_groups) * static_cast<uint64_t>(prefix_blocks);
  std::vector<std::vector<int32_t>> group_tokens;
  if (groups && o.prefix_encoding == PrefixEncoding::TOKEN_IDS) {
    for (int32_t g = 0; g < o.prefix_groups; ++g) {
      Rng rng(derive_seed(o.seed, kGroupTokensStream + static_cast<uint64_t>(g)));
      auto& toks = group_tokens.emplace_back();
      for (int32_t k = 0; k < o.prefix_tokens; ++k) {
        toks.push_back(static_cast<int32_t>(rng.uniform_int(0, o.vocab_size - 1)));
      }
    }
  }

  const std::vector<int64_t> times = arrivals(o);
  std::vector<TraceRequest> out;
  out.reserve(times.size());
  for (size_t i = 0; i < times.size(); ++i) {
    TraceRequest r;
    r.arrival_ns = times[i];
    r.source_line = static_cast<int64_t>(i) + 1;
    int32_t in = input.sample();
    r.output_tokens = joint ? output.from_index(input.last_index()) : output.sample();
    if (o.priority_levels > 1) {
      r.priority = static_cast<int32_t>(priority_rng.uniform_int(0, o.priority_levels - 1));
    }
    if (groups) {
      const auto g = static_cast<size_t>(group_rng.uniform_int(0, o.prefix_groups - 1));
      in += o.prefix_tokens;  // <= kMaxGeneratedLength (the sampler's bound)
      const int64_t n_elements =
          o.prefix_encoding == PrefixEncoding::HASH_IDS ? (int64_t{in} + bs - 1) / bs : in;
      elements += n_elements;
      if (elements > kMaxGeneratedElements) {
        throw std::invalid_argument(too_much_prefix_content(o, static_cast<int64_t>(i) + 1));
      }
      if (o.prefix_encoding == PrefixEncoding::HASH_IDS) {
        auto ids = std::make_shared<std::vector<uint64_t>>();
        const int64_t n_blocks = n_elements;
        ids->reserve(static_cast<size_t>(n_blocks));
        for (int64_t k = 0; k < n_blocks; ++k) {
          ids->push_back(k < prefix_blocks ? static_cast<uint64_t>(g) * prefix_blocks + k
                                           : next_unique_id++);
        }
        r.hash_ids = std::move(ids);
        r.hash_block_size = o.hash_block_size;
      } else {
        auto toks = std::make_shared<std::vector<int32_t>>(group_tokens[g]);
        toks->reserve(static_cast<size_t>(in));
        while (static_cast<int32_t>(toks->size()) < in) {
          toks->push_back(static_cast<int32_t>(token_rng.uniform_int(0, o.vocab_size - 1)));
        }
        r.prompt_token_ids = std::move(toks);
      }
    }
    r.input_tokens = in;
    out.push_back(std::move(r));
  }
  if (clipped != nullptr) *clipped = {input.clipped(), output.clipped()};
  return out;
}

}  // namespace kvsim
