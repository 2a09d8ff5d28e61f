// Synthetic traces (`kvsim gen`): seeded arrivals, length distributions and shared-prefix groups,
// produced as TraceRequests and written in kvsim's JSONL (trace_writer.h).
//
// Determinism: arrivals, input lengths, output lengths, prefix groups, priorities and token ids
// each draw from their own std::mt19937_64 stream (derive_seed(seed, stream)) through the
// variate code in trace_random.h, so the same options give identical requests on every run, and
// changing e.g. the output distribution leaves the arrivals unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvsim/core/types.h"
#include "kvsim/sim/traces/trace.h"

namespace kvsim {

// A distribution of token counts. Every draw is rounded to an integer and clipped to
// [1, kMaxGeneratedLength] (with shared prefixes: [1, kMaxGeneratedLength - prefix_tokens]).
// fixed:N and uniform:LO,HI are never clipped: N or HI out of range is an error instead. The
// same rule, in proportion, for normal and lognormal: parameters that would put more than
// kMaxClippedShare of the draws outside the range (e.g. a normal mean below 1) are an error, so
// a typo cannot turn into a spike of length-1 requests; generate_trace counts the draws that
// were clipped (GenClipped) so the rest is visible too.
struct LengthDist {
  enum class Kind : uint8_t { FIXED, UNIFORM, NORMAL, LOGNORMAL, ZIPF, EMPIRICAL };
  Kind kind = Kind::FIXED;
  double a = 0;  // FIXED: n; UNIFORM: low; NORMAL: mean; LOGNORMAL: mu of ln L; ZIPF: s
  double b = 0;  // UNIFORM: high (inclusive); NORMAL: sigma; LOGNORMAL: sigma of ln L; ZIPF: max
  std::string path;  // EMPIRICAL: a trace file whose lengths are resampled uniformly
};
inline constexpr int64_t kMaxGeneratedLength = 1 << 24;
inline constexpr double kMaxClippedShare = 0.10;

// Parses "fixed:N", "uniform:LO,HI", "normal:MEAN,SIGMA", "lognormal:MU,SIGMA", "zipf:S,MAX" or
// "empirical:PATH"; throws std::invalid_argument with the accepted forms otherwise.
LengthDist parse_length_dist(std::string_view spec);

enum class GenArrival : uint8_t {
  POISSON,      // exponential gaps, mean 1/rate
  GAMMA,        // gamma gaps, mean 1/rate, coefficient of variation cv (cv 1 = Poisson)
  CONSTANT,     // gaps of exactly 1/rate
  BURST,        // burst_size requests at once every burst_period_s seconds
  ALL_AT_ONCE,  // every arrival 0
};
GenArrival parse_gen_arrival(std::string_view name);

// How shared system prompts are written.
enum class PrefixEncoding : uint8_t { HASH_IDS, TOKEN_IDS };

struct TraceGenOptions {
  int64_t num_requests = 1000;
  uint64_t seed = 0;
  GenArrival arrival = GenArrival::POISSON;
  double rate = 1.0;  // requests per second
  double cv = 1.0;    // GAMMA only; in [1e-3, 1e3]
  int64_t burst_size = 1;
  double burst_period_s = 1.0;
  LengthDist input{LengthDist::Kind::FIXED, 512, 0, {}};
  LengthDist output{LengthDist::Kind::FIXED, 128, 0, {}};
  // Shared prefixes: each request starts with one of prefix_groups system prompts (chosen
  // uniformly) of prefix_tokens tokens, followed by its own input tokens (so its prompt is
  // prefix_tokens + the drawn input length, at most kMaxGeneratedLength). 0 groups: no shared
  // prefixes. The hash ids or token ids written for them may total at most 2^28 per trace.
  int32_t prefix_groups = 0;
  int32_t prefix_tokens = 0;
  PrefixEncoding prefix_encoding = PrefixEncoding::HASH_IDS;
  int32_t hash_block_size = kDefaultBlockSize;  // tokens per hash id (HASH_IDS): vLLM's block size
  int32_t vocab_size = 32000;   // token ids are drawn from [0, vocab_size) (TOKEN_IDS)
  int32_t priority_levels = 1;  // >1: priorities drawn uniformly from [0, priority_levels)
};

// Draws clipped to the valid range, per length (empirical lengths of 0 count too: they become 1).
struct GenClipped {
  int64_t input = 0;
  int64_t output = 0;
};

// Generates the requests in arrival order (source_line = 1-based index). Throws
// std::invalid_argument on impossible options, naming --input-len / --output-len for a normal
// or lognormal distribution that would be clipped for more than kMaxClippedShare of the draws.
// `clipped`, when given, receives the clip counts.
std::vector<TraceRequest> generate_trace(const TraceGenOptions& options,
                                         GenClipped* clipped = nullptr);

}  // namespace kvsim
