// `gen`: a synthetic trace (kvsim JSONL), seeded and deterministic (sim/traces/trace_gen.h), from
// the settings as given: the arrival process and length distributions by name, and which of the
// settings that apply to only some of them were given (so that a setting that would be ignored
// is refused rather than dropped).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kvsim/sim/traces/trace.h"
#include "kvsim/sim/traces/trace_gen.h"

namespace kvsim::run {

struct GenJobOptions {
  // Counts, seed, rates, prefix shape (its arrival / input / output / prefix_encoding are set
  // from the names below).
  TraceGenOptions gen;
  std::string arrival = "poisson";  // poisson | gamma | constant | burst | all-at-once
  std::string input = "fixed:512";  // a length distribution (parse_length_dist)
  std::string output = "fixed:128";
  std::string prefix_as = "hash-ids";  // hash-ids | token-ids
  // Parameter ids given by the user among rate, cv, burst_size, burst_period, prefix_tokens,
  // prefix_as, hash_block_size, vocab_size.
  std::set<std::string, std::less<>> given;
};

// The generator's options: the combination rules (rate needs arrival poisson, gamma or
// constant; cv needs gamma; burst_* need burst; prefix settings need prefix_groups > 0, and
// prefix_groups needs prefix_tokens; hash_block_size / vocab_size need their prefix encoding),
// then the names and distributions parsed. Throws std::invalid_argument naming the parameter.
TraceGenOptions resolve_gen_options(const GenJobOptions& options);

struct GenResult {
  std::vector<TraceRequest> requests;  // in arrival order
  GenClipped clipped;
  // "wrote N requests to DEST (span S s, mean input I, mean output O tokens[; clipped ...])".
  std::string summary(std::string_view destination) const;
};

// Generates the trace for options from resolve_gen_options (which reads empirical traces).
GenResult run_gen(const TraceGenOptions& resolved);

}  // namespace kvsim::run
