#include "trace_options.h"

#include <string>

namespace kvsim::cli {

void add_trace_options(CLI::App* app, TraceReadOptions& o) {
  const char* group = "Trace";
  app->add_option_function<std::string>(
         "--format", [&o](const std::string& s) { o.format = parse_trace_format(s); },
         "Trace layout (default: detected from the header or first record)")
      ->check(CLI::IsMember(
          {"auto", "azure", "vidur", "burstgpt", "mooncake", "bailian", "sharegpt", "kvsim"}))
      ->default_str("auto")
      ->group(group);
  app->add_option("--max-requests", o.max_requests,
                  "Keep the first N requests in arrival order (0 = all)")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  app->add_option("--start", o.start_s, "Window start, seconds after the first arrival")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  app->add_option("--duration", o.duration_s, "Window length in seconds (0 = to the end)")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  app->add_option("--time-scale", o.time_scale,
                  "Multiply arrival times by this factor (0.5 = twice the request rate)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str()
      ->group(group);
  app->add_option_function<std::string>(
         "--arrival", [&o](const std::string& s) { o.arrival = parse_arrival_mode(s); },
         "Arrival times: the trace's, all at t=0, or synthetic Poisson at --rate")
      ->check(CLI::IsMember({"trace", "all-at-once", "poisson"}))
      ->default_str("trace")
      ->group(group);
  app->add_option("--rate", o.rate, "Requests per second for --arrival poisson")
      ->check(CLI::PositiveNumber)
      ->group(group);
  app->add_option("--seed", o.seed, "Seed for synthetic arrivals")
      ->capture_default_str()
      ->group(group);
  app->add_flag("--skip-bad-rows", o.skip_bad_rows,
                "Count malformed rows by reason and continue instead of failing")
      ->group(group);
  app->add_option("--hash-block-size", o.hash_block_size,
                  "Tokens per trace hash id (default: Mooncake 512, Bailian 16, kvsim per record)")
      ->check(CLI::PositiveNumber)
      ->group(group);
}

}  // namespace kvsim::cli
