#include "scheduler_flags.h"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include <fmt/core.h>

#include "kvsim/sim/io/parse_number.h"

#include "kvsim/run/parameters.h"
#include "validators.h"

namespace kvsim::cli {
namespace {

// --prefix-cache-retention-interval: "none" (vLLM's None: dense) is -1, else a decimal integer
// in [0, 2^31) under the strict number rule (validators.h). Returns the error, or "" with `out`
// set.
std::string retention_interval(std::string_view v, int32_t& out) {
  if (v == "none" || v == "None") {
    out = -1;
    return "";
  }
  int64_t n = 0;
  switch (parse_integer(v, n)) {
    case ParseStatus::kOk:
      if (n < 0) return fmt::format("must be >= 0 or none, got {}", v);
      if (n > std::numeric_limits<int32_t>::max()) {
        return fmt::format("'{}' is out of range (at most 2^31 - 1)", v);
      }
      out = static_cast<int32_t>(n);
      return "";
    case ParseStatus::kOutOfRange:
      return fmt::format("'{}' is out of range (at most 2^63 - 1)", v);
    case ParseStatus::kNotNumber:
      break;
  }
  return fmt::format("'{}' is not a decimal integer or none", v);
}

}  // namespace

void add_scheduler_options(CLI::App* app, run::SchedulerOptions& o) {
  const char* group = "Scheduler";
  app->add_option("--long-prefill-token-threshold", o.long_prefill_token_threshold,
                  "Cap on one request's prefill tokens per step (0 = off)")
      ->check(non_negative())
      ->capture_default_str()
      ->group(group);
  // Two plain flags rather than CLI11's "a,!b" pair, whose help prints a stray "{false}".
  app->add_flag_callback(
         "--enable-chunked-prefill", [&o] { o.enable_chunked_prefill = true; },
         "Chunked prefill on (the default)")
      ->group(group);
  app->add_flag_callback(
         "--no-enable-chunked-prefill",
         [app, &o] {
           if (app->get_option("--enable-chunked-prefill")->count() > 0) {
             throw CLI::ValidationError("--no-enable-chunked-prefill",
                                        "conflicts with --enable-chunked-prefill");
           }
           o.enable_chunked_prefill = false;
         },
         "Chunked prefill off")
      ->group(group);
  app->add_flag_callback(
         "--enable-prefix-caching", [&o] { o.enable_prefix_caching = true; },
         "Prefix caching on (the default)")
      ->group(group);
  app->add_flag_callback(
         "--no-enable-prefix-caching",
         [app, &o] {
           if (app->get_option("--enable-prefix-caching")->count() > 0) {
             throw CLI::ValidationError("--no-enable-prefix-caching",
                                        "conflicts with --enable-prefix-caching");
           }
           o.enable_prefix_caching = false;
         },
         "Prefix caching off")
      ->group(group);
  app->add_option("--scheduling-policy", o.policy, "fcfs | priority")
      ->check(one_of(run::kSchedulingPolicies))
      ->capture_default_str()
      ->group(group);
  app->add_option("--watermark", o.watermark,
                  "Free-block headroom kept at admission, a fraction of the pool in [0, 1)")
      ->check(fraction_below_one())
      ->capture_default_str()
      ->group(group);
  app->add_flag_callback(
         "--no-scheduler-reserve-full-isl", [&o] { o.scheduler_reserve_full_isl = false; },
         "Admit without reserving blocks for the full prompt (vLLM's gate is on by default)")
      ->group(group);
  app->add_option("--num-lookahead-tokens", o.num_lookahead_tokens,
                  "Extra KV slots allocated per step (speculative decoding)")
      ->check(non_negative())
      ->capture_default_str()
      ->group(group);
  app->add_flag_callback(
         "--async-scheduling", [&o] { o.async_scheduling = true; },
         "vLLM's async scheduling: batch k+1 is scheduled while batch k runs (the default; "
         "not with --preemption-mode swap)")
      ->group(group);
  app->add_flag_callback(
         "--no-async-scheduling",
         [app, &o] {
           if (app->get_option("--async-scheduling")->count() > 0) {
             throw CLI::ValidationError("--no-async-scheduling",
                                        "conflicts with --async-scheduling");
           }
           o.async_scheduling = false;
         },
         "Sync scheduling: schedule, run and process each step in turn (vLLM "
         "--no-async-scheduling)")
      ->group(group);
  app->add_option(
         "--step-time", o.step_time,
         "fixed:MS | roofline[:overhead_ms=..,mfu=..,mbu=..] | physics:FILE | calibrated:FILE "
         "| profile:DIR[,all_reduce=FILE,overhead_ms=..,attn_mfu=..,attn_mbu=..] "
         "(docs/step-time-model.md)")
      ->capture_default_str()
      ->group(group);
  // vLLM 0.33's engine arguments (the first two refused with --vllm-version 0.26).
  app->add_option("--max-num-active-seqs", o.max_num_active_seqs,
                  "vLLM 0.33: admit new requests only while fewer than this many run (default "
                  "max_num_seqs)")
      ->check(positive())
      ->group(group);
  app->add_flag_callback(
         "--long-prefill-token-threshold-adaptive",
         [&o] { o.long_prefill_token_threshold_adaptive = true; },
         "vLLM 0.33: raise the threshold to max_num_batched_tokens / requests each step")
      ->group(group);
  app->add_option_function<std::string>(
         "--prefix-cache-retention-interval",
         [&o](const std::string& v) {
           int32_t n = 0;
           if (retention_interval(v, n).empty()) o.prefix_cache_retention_interval = n;
         },
         "Sliding-window prefix-cache retention in tokens: 0 = sparse (0.33's default), N = "
         "also every N tokens (a multiple of the block size), none = dense (0.26's default; "
         "0.26 read it from VLLM_PREFIX_CACHE_RETENTION_INTERVAL)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            int32_t n = 0;
            return retention_interval(v, n);
          },
          "INT|none"))
      ->group(group);
}

}  // namespace kvsim::cli
