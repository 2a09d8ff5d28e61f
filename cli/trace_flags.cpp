#include "trace_flags.h"

#include "interrupt.h"
#include "kvsim/run/parameters.h"
#include "kvsim/run/trace_input.h"
#include "validators.h"

namespace kvsim::cli {

void add_trace_options(CLI::App* app, TraceReadOptions& o) {
  const char* group = "Trace";
  app->add_option_function<std::string>(
         "--format", [&o](const std::string& s) { o.format = parse_trace_format(s); },
         "Trace layout (default: detected from the header or first record)")
      ->check(one_of(run::kTraceFormatNames))
      ->default_str("auto")
      ->group(group);
  app->add_option("--max-requests", o.max_requests,
                  "Keep the first N requests in arrival order (0 = all)")
      ->check(non_negative())
      ->group(group);
  app->add_option("--start", o.start_s, "Window start, seconds after the first arrival")
      ->check(non_negative())
      ->group(group);
  app->add_option("--duration", o.duration_s, "Window length in seconds (0 = to the end)")
      ->check(non_negative())
      ->group(group);
  app->add_option("--time-scale", o.time_scale,
                  "Multiply arrival times by this factor (0.5 = twice the request rate)")
      ->check(positive())
      ->capture_default_str()
      ->group(group);
  app->add_option_function<std::string>(
         "--arrival", [&o](const std::string& s) { o.arrival = parse_arrival_mode(s); },
         "Arrival times: the trace's, all at t=0, or synthetic Poisson at --rate")
      ->check(one_of(run::kArrivalModeNames))
      ->default_str("trace")
      ->group(group);
  app->add_option("--rate", o.rate, "Requests per second for --arrival poisson (required there)")
      ->check(positive())
      ->group(group);
  app->add_option_function<std::string>(
         "--seed", [&o](const std::string& s) { o.seed = parse_u64("--seed", s); },
         "Seed for --arrival poisson, 0 .. 2^64-1")
      ->default_str("0")
      ->group(group);
  app->add_flag("--skip-bad-rows", o.skip_bad_rows,
                "Count malformed rows by reason and continue instead of failing")
      ->group(group);
  app->add_option("--max-input-bytes", o.limits.max_bytes,
                  "Refuse a trace larger than this, after decompression (default 4 GiB)")
      ->check(positive())
      ->group(group);
  app->add_option("--max-line-bytes", o.limits.max_line_bytes,
                  "Refuse a trace line longer than this (default 256 MiB)")
      ->check(positive())
      ->group(group);
  app->add_option("--hash-block-size", o.hash_block_size,
                  "Tokens per trace hash id (default: Mooncake 512, Bailian 16, kvsim per record)")
      ->check(positive())
      ->group(group);
}

void check_trace_options(const CLI::App& app, const TraceReadOptions& o) {
  run::TraceSettingsGiven given;
  given.rate = app.get_option("--rate")->count() > 0;
  given.seed = app.get_option("--seed")->count() > 0;
  run::check_trace_settings(o, given);
}

Trace read_cli_trace(const std::string& path, const TraceReadOptions& options) {
  try {
    return read_trace(path, options);
  } catch (...) {
    throw_if_interrupted();
    throw;
  }
}

}  // namespace kvsim::cli
