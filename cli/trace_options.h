// The trace-reading flags shared by the commands that read a trace (replay, sweep, gen's
// empirical lengths): --format --max-requests --start --duration --time-scale --arrival --rate
// --seed --skip-bad-rows --hash-block-size.
#pragma once

#include <CLI/CLI.hpp>

#include "kvsim/sim/trace.h"

namespace kvsim::cli {

// Adds the flags to `app`; parsing stores into `options`, which must outlive the parse.
// Invalid names (format, arrival) fail the parse with the list of accepted values.
void add_trace_options(CLI::App* app, TraceReadOptions& options);

}  // namespace kvsim::cli
