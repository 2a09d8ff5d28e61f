// The trace-reading flags shared by the commands that replay a trace (replay, sweep, size):
// --format --max-requests --start --duration --time-scale --arrival --rate --seed
// --skip-bad-rows --max-input-bytes --max-line-bytes --hash-block-size.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "kvsim/sim/traces/trace.h"

namespace kvsim::cli {

// Adds the flags to `app`; parsing stores into `options`, which must outlive the parse.
// Invalid names (format, arrival) fail the parse with the list of accepted values.
void add_trace_options(CLI::App* app, TraceReadOptions& options);

// After parsing: run::check_trace_settings with what was given (--rate, --seed).
void check_trace_options(const CLI::App& app, const TraceReadOptions& options);

// read_trace() for the commands. The signal handlers do not restart system calls, so an open
// or read that blocks (a FIFO without a writer, a stalled pipe) fails with EINTR on
// SIGINT/SIGTERM/SIGHUP; that failure is reported as the interrupt (interrupt.h), not as a
// read error.
Trace read_cli_trace(const std::string& path, const TraceReadOptions& options);

}  // namespace kvsim::cli
