// Reading the trace a command replays: the trace settings' combination rules, the "no request
// left" refusal, and whether a trace can be streamed (read twice).
#pragma once

#include <cstdint>
#include <string>

#include "kvsim/sim/traces/trace.h"

namespace kvsim::run {

// Which trace settings were given (the CLI counts flags; Python passes the keywords it got):
// what TraceReadOptions cannot tell from its defaults.
struct TraceSettingsGiven {
  bool rate = false;
  bool seed = false;
};

// Throws std::invalid_argument for settings that would be ignored (rate or seed without
// arrival poisson) or are missing (arrival poisson without rate). hash_block_size is not checked
// here: whether the trace has hash_ids is known only once it is read (read_trace refuses it).
void check_trace_settings(const TraceReadOptions& options, const TraceSettingsGiven& given);

// Throws std::invalid_argument "PATH: no requests left after filtering (why)" when the trace
// read with `options` holds no request: an empty file, every row dropped, or a window/limit
// that selects nothing.
void require_requests(const Trace& trace, const TraceReadOptions& options);
// The same for a trace whose requests are not held (TraceStream: its header and count).
void require_requests(const Trace& trace, int64_t num_requests, const TraceReadOptions& options);

// Whether the trace can be read twice (TraceStream's two passes): only a regular file. A pipe,
// /dev/stdin, <(...) or a FIFO yields its bytes once, so it is read whole, once.
bool trace_is_rereadable(const std::string& path);

}  // namespace kvsim::run
