// The fingerprint a sharded run (kvsim sweep, kvsim size) writes into every shard so that
// --merge refuses to combine shards of different runs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "kvsim/sim/traces/trace.h"

namespace kvsim::cli {

// sweep_fingerprint of: `canon_prefix`, then each result-affecting flag of `cmd` as given
// (name=values, in the command's option order; the flags `is_execution_flag` names and the
// TRACE positional are left out), then the requests actually read (arrival, lengths, priority,
// prefix ids), so shards read from differently named copies of one trace still match.
uint64_t run_fingerprint(std::string_view canon_prefix, const CLI::App& cmd, const Trace& trace,
                         const std::function<bool(const std::string&)>& is_execution_flag);

}  // namespace kvsim::cli
