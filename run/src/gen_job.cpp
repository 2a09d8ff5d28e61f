#include "kvsim/run/gen_job.h"

#include <stdexcept>

#include <fmt/core.h>

#include "kvsim/core/param.h"

namespace kvsim::run {
namespace {

// The distribution, or an error naming the parameter as well as the text.
LengthDist parse_length(const char* id, const std::string& spec) {
  try {
    return parse_length_dist(spec);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: {}", param(id), e.what()));
  }
}

void check_combinations(const GenJobOptions& o) {
  const auto needs = [&o](const char* id, bool ok, const std::string& what) {
    if (o.given.contains(id) && !ok) {
      throw std::invalid_argument(fmt::format("{} needs {}", param(id), what));
    }
  };
  const std::string& arr = o.arrival;
  needs("rate", arr == "poisson" || arr == "gamma" || arr == "constant",
        param("arrival", "poisson") + ", gamma or constant");
  needs("cv", arr == "gamma", param("arrival", "gamma"));
  needs("burst_size", arr == "burst", param("arrival", "burst"));
  needs("burst_period", arr == "burst", param("arrival", "burst"));
  const bool prefixes = o.gen.prefix_groups > 0;
  const std::string groups = param("prefix_groups") + " > 0";
  needs("prefix_tokens", prefixes, groups);
  needs("prefix_as", prefixes, groups);
  // Hash ids and token ids are only written for shared prefixes, each by its own encoding.
  needs("hash_block_size", prefixes && o.prefix_as == "hash-ids",
        groups + " and " + param("prefix_as", "hash-ids"));
  needs("vocab_size", prefixes && o.prefix_as == "token-ids",
        groups + " and " + param("prefix_as", "token-ids"));
  if (prefixes && !o.given.contains("prefix_tokens")) {
    throw std::invalid_argument(fmt::format("{} needs {} (tokens per shared prompt)",
                                            param("prefix_groups"), param("prefix_tokens")));
  }
}

}  // namespace

TraceGenOptions resolve_gen_options(const GenJobOptions& o) {
  check_combinations(o);
  if (o.prefix_as != "hash-ids" && o.prefix_as != "token-ids") {
    throw std::invalid_argument(
        fmt::format("{}: unknown value '{}' (expected hash-ids or token-ids)", param("prefix_as"),
                    o.prefix_as));
  }
  TraceGenOptions g = o.gen;
  g.arrival = parse_gen_arrival(o.arrival);
  g.input = parse_length("input_len", o.input);
  g.output = parse_length("output_len", o.output);
  g.prefix_encoding =
      o.prefix_as == "token-ids" ? PrefixEncoding::TOKEN_IDS : PrefixEncoding::HASH_IDS;
  return g;
}

GenResult run_gen(const TraceGenOptions& resolved) {
  GenResult r;
  r.requests = generate_trace(resolved, &r.clipped);
  return r;
}

std::string GenResult::summary(std::string_view destination) const {
  double in_sum = 0;
  double out_sum = 0;
  for (const auto& r : requests) {
    in_sum += r.input_tokens;
    out_sum += r.output_tokens;
  }
  const auto n = static_cast<double>(requests.size());
  // Draws outside [1, max] are clipped; say how many, so a distorted distribution shows.
  std::string clips;
  if (clipped.input > 0 || clipped.output > 0) {
    clips = fmt::format("; clipped to the valid range: {} input and {} output lengths",
                        clipped.input, clipped.output);
  }
  return fmt::format(
      "wrote {} requests to {} (span {:.3f} s, mean input {:.1f}, mean output {:.1f} tokens{})",
      requests.size(), destination,
      requests.empty() ? 0.0 : static_cast<double>(requests.back().arrival_ns) * 1e-9, in_sum / n,
      out_sum / n, clips);
}

}  // namespace kvsim::run
