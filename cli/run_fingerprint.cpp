#include "run_fingerprint.h"

#include <fmt/core.h>

#include "kvsim/sim/sweep/sweep.h"

namespace kvsim::cli {

uint64_t run_fingerprint(std::string_view canon_prefix, const CLI::App& cmd, const Trace& trace,
                         const std::function<bool(const std::string&)>& is_execution_flag) {
  std::string canon(canon_prefix);
  for (const CLI::Option* opt : cmd.get_options()) {
    const std::string name = opt->get_name();
    if (opt->count() == 0 || is_execution_flag(name) || name == "TRACE") continue;
    canon += name + "=";
    for (const std::string& r : opt->results()) canon += r + "\x1f";
    canon += "\x1e";
  }
  std::string reqs;
  for (const TraceRequest& r : trace.requests) {
    reqs += fmt::format("{},{},{},{},{};", r.arrival_ns, r.input_tokens, r.output_tokens,
                        r.priority, r.hash_block_size);
    if (r.hash_ids) {
      for (uint64_t h : *r.hash_ids) reqs += fmt::format("{:x} ", h);
    }
    if (r.prompt_token_ids) {
      for (int32_t t : *r.prompt_token_ids) reqs += fmt::format("{} ", t);
    }
  }
  canon += fmt::format("trace={:016x}", sweep_fingerprint(reqs));
  return sweep_fingerprint(canon);
}

}  // namespace kvsim::cli
