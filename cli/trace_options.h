// The trace-reading flags shared by the commands that replay a trace (replay, sweep): --format
// --max-requests --start --duration --time-scale --arrival --rate --seed --skip-bad-rows
// --hash-block-size. (gen's empirical:PATH lengths read a trace with the default options.)
#pragma once

#include <CLI/CLI.hpp>

#include "kvsim/sim/traces/trace.h"

namespace kvsim::cli {

// Adds the flags to `app`; parsing stores into `options`, which must outlive the parse.
// Invalid names (format, arrival) fail the parse with the list of accepted values.
void add_trace_options(CLI::App* app, TraceReadOptions& options);

// After parsing: throws std::invalid_argument for flags that would be ignored (--rate or --seed
// without --arrival poisson) or are missing (--arrival poisson without --rate). --hash-block-size
// is not checked here: whether the trace has hash_ids is only known once it is read, so
// read_trace() refuses it for traces without any.
void check_trace_options(const CLI::App& app, const TraceReadOptions& options);

// Throws std::invalid_argument "PATH: no requests left after filtering (why)" when the trace
// read with `options` holds no request: an empty file, every row dropped, or a window/limit
// that selects nothing.
void require_requests(const Trace& trace, const TraceReadOptions& options);
// The same for a trace whose requests are not held (TraceStream: its header and count).
void require_requests(const Trace& trace, int64_t num_requests, const TraceReadOptions& options);

// Whether the trace can be read twice (TraceStream's two passes): only a regular file. A pipe,
// /dev/stdin, <(...) or a FIFO yields its bytes once, so it is read whole, once.
bool trace_is_rereadable(const std::string& path);

// read_trace() for the commands. The signal handlers do not restart system calls, so an open
// or read that blocks (a FIFO without a writer, a stalled pipe) fails with EINTR on
// SIGINT/SIGTERM/SIGHUP; that failure is reported as the interrupt (interrupt.h), not as a
// read error.
Trace read_cli_trace(const std::string& path, const TraceReadOptions& options);

}  // namespace kvsim::cli
