// `kvsim gen`: writes a synthetic trace in kvsim's JSONL (run/gen_job.h and sim/traces/trace_gen.h
// do the work; here: flags, the output file, the summary line).
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/core.h>

#include "commands.h"
#include "interrupt.h"
#include "kvsim/run/gen_job.h"
#include "kvsim/sim/traces/trace_gen.h"
#include "kvsim/sim/traces/trace_writer.h"
#include "output_files.h"
#include "validators.h"

namespace kvsim::cli {
namespace {

struct GenArgs {
  run::GenJobOptions job;
  std::string out = "-";
  bool quiet = false;
};

void run_gen(const CLI::App& cmd, GenArgs& a) {
  // Which flags were given: the settings that apply to some arrivals or encodings only.
  for (const char* flag : {"--rate", "--cv", "--burst-size", "--burst-period", "--prefix-tokens",
                           "--prefix-as", "--hash-block-size", "--vocab-size"}) {
    if (cmd.get_option(flag)->count() > 0) {
      std::string id = std::string(flag).substr(2);
      std::replace(id.begin(), id.end(), '-', '_');
      a.job.given.insert(id);
    }
  }
  const TraceGenOptions gen = run::resolve_gen_options(a.job);
  // empirical:PATH lengths are read from a trace, which the output must not replace.
  OutputFiles outputs;
  outputs.add("--output", a.out);
  constexpr std::string_view kEmpirical = "empirical:";
  for (const auto& [what, spec] : {std::pair{"--input-len's trace", &a.job.input},
                                   std::pair{"--output-len's trace", &a.job.output}}) {
    if (spec->starts_with(kEmpirical)) outputs.add_input(what, spec->substr(kEmpirical.size()));
  }
  outputs.open_all();
  const run::GenResult result = run::run_gen(gen);
  throw_if_interrupted();
  write_kvsim_jsonl(outputs.stream("--output"), result.requests,
                    a.out != "-" && a.out.ends_with(".gz"));
  outputs.finish("--output");
  throw_if_interrupted();
  outputs.commit_all();
  if (!a.quiet) {
    fmt::print(stderr, "kvsim gen: {}\n", result.summary(a.out == "-" ? "stdout" : a.out));
  }
}

}  // namespace

void register_gen_command(CLI::App& app) {
  auto args = std::make_shared<GenArgs>();
  CLI::App* cmd = app.add_subcommand(
      "gen", "Generate a synthetic trace (kvsim JSONL), seeded and deterministic");
  TraceGenOptions& g = args->job.gen;
  cmd->add_option("-n,--num-requests", g.num_requests, "Number of requests")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option_function<std::string>(
         "--seed", [&g](const std::string& s) { g.seed = parse_u64("--seed", s); },
         "Random seed, 0 .. 2^64-1 (same seed, same bytes)")
      ->default_str("0");
  cmd->add_option("--arrival", args->job.arrival, "Arrival process")
      ->check(CLI::IsMember({"poisson", "gamma", "constant", "burst", "all-at-once"}))
      ->capture_default_str();
  cmd->add_option("--rate", g.rate, "Requests per second (poisson, gamma, constant)")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--cv", g.cv, "Coefficient of variation of gamma inter-arrival gaps")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--burst-size", g.burst_size, "Requests per burst (burst arrivals)")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--burst-period", g.burst_period_s, "Seconds between bursts (burst arrivals)")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--input-len", args->job.input,
                  "Input length: fixed:N | uniform:LO,HI | normal:MEAN,SIGMA | "
                  "lognormal:MU,SIGMA | zipf:S,MAX | empirical:TRACE. Draws are rounded and "
                  "clipped to [1, 2^24]; normal/lognormal parameters that would clip more than 10 "
                  "% of them are refused, and the summary line counts the clipped draws")
      ->capture_default_str();
  cmd->add_option("--output-len", args->job.output, "Output length (same forms as --input-len)")
      ->capture_default_str();
  cmd->add_option("--prefix-groups", g.prefix_groups,
                  "Number of shared system prompts (0 = no shared prefixes)")
      ->check(non_negative());
  cmd->add_option("--prefix-tokens", g.prefix_tokens,
                  "Tokens per shared system prompt (added to each request's input length)")
      ->check(non_negative());
  cmd->add_option("--prefix-as", args->job.prefix_as,
                  "Write shared prefixes as hash ids or token ids")
      ->check(CLI::IsMember({"hash-ids", "token-ids"}))
      ->capture_default_str();
  cmd->add_option("--hash-block-size", g.hash_block_size,
                  "Tokens per hash id (shared prefixes written as hash ids)")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--vocab-size", g.vocab_size,
                  "Token ids are drawn from [0, vocab-size) (shared prefixes written as token ids)")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--priority-levels", g.priority_levels,
                  "Draw priorities uniformly from [0, N) (1 = all priority 0)")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("-o,--output", args->out, "Output file ('-' = stdout; gzip if it ends in .gz)")
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", args->quiet, "Do not print the summary line on stderr");
  cmd->callback([args, cmd] { run_gen(*cmd, *args); });
}

}  // namespace kvsim::cli
