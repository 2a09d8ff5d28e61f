// `kvsim gen`: writes a synthetic trace in kvsim's JSONL (sim/trace_gen.h does the work).
#include <memory>
#include <stdexcept>
#include <string>

#include <fmt/core.h>

#include "commands.h"
#include "interrupt.h"
#include "kvsim/sim/traces/trace_gen.h"
#include "kvsim/sim/traces/trace_writer.h"
#include "output_files.h"
#include "validators.h"

namespace kvsim::cli {
namespace {

struct GenArgs {
  TraceGenOptions gen;
  std::string arrival = "poisson";
  std::string input = "fixed:512";
  std::string output = "fixed:128";
  std::string prefix_as = "hash-ids";
  std::string out = "-";
  bool quiet = false;
};

// Flags that only apply to some arrival processes or with shared prefixes: refuse them where
// they would be ignored.
void check_flag_combinations(const CLI::App& cmd, const GenArgs& a) {
  const auto given = [&cmd](const char* flag) { return cmd.get_option(flag)->count() > 0; };
  const auto needs = [&](const char* flag, bool ok, const char* what) {
    if (given(flag) && !ok) throw std::invalid_argument(fmt::format("{} needs {}", flag, what));
  };
  const std::string& arr = a.arrival;
  needs("--rate", arr == "poisson" || arr == "gamma" || arr == "constant",
        "--arrival poisson, gamma or constant");
  needs("--cv", arr == "gamma", "--arrival gamma");
  needs("--burst-size", arr == "burst", "--arrival burst");
  needs("--burst-period", arr == "burst", "--arrival burst");
  const bool prefixes = a.gen.prefix_groups > 0;
  needs("--prefix-tokens", prefixes, "--prefix-groups > 0");
  needs("--prefix-as", prefixes, "--prefix-groups > 0");
  // Hash ids and token ids are only written for shared prefixes, each by its own encoding.
  needs("--hash-block-size", prefixes && a.prefix_as == "hash-ids",
        "--prefix-groups > 0 and --prefix-as hash-ids");
  needs("--vocab-size", prefixes && a.prefix_as == "token-ids",
        "--prefix-groups > 0 and --prefix-as token-ids");
  if (prefixes && !given("--prefix-tokens")) {
    throw std::invalid_argument("--prefix-groups needs --prefix-tokens (tokens per shared prompt)");
  }
}

// The distribution, or an error naming the flag as well as the text.
LengthDist parse_length_flag(const char* flag, const std::string& spec) {
  try {
    return parse_length_dist(spec);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: {}", flag, e.what()));
  }
}

void run_gen(const CLI::App& cmd, GenArgs& a) {
  check_flag_combinations(cmd, a);
  a.gen.arrival = parse_gen_arrival(a.arrival);
  a.gen.input = parse_length_flag("--input-len", a.input);
  a.gen.output = parse_length_flag("--output-len", a.output);
  a.gen.prefix_encoding =
      a.prefix_as == "token-ids" ? PrefixEncoding::TOKEN_IDS : PrefixEncoding::HASH_IDS;
  // empirical:PATH lengths are read from a trace, which the output must not replace.
  OutputFiles outputs;
  outputs.add("--output", a.out);
  for (const std::string* spec : {&a.input, &a.output}) {
    if (spec->starts_with("empirical:")) {
      outputs.add_input(spec == &a.input ? "--input-len's trace" : "--output-len's trace",
                        spec->substr(std::string_view("empirical:").size()));
    }
  }
  outputs.open_all();
  GenClipped clipped;
  const std::vector<TraceRequest> reqs = generate_trace(a.gen, &clipped);
  throw_if_interrupted();
  write_kvsim_jsonl(outputs.stream("--output"), reqs, a.out != "-" && a.out.ends_with(".gz"));
  outputs.finish("--output");
  throw_if_interrupted();
  outputs.commit_all();
  if (!a.quiet) {
    double in_sum = 0;
    double out_sum = 0;
    for (const auto& r : reqs) {
      in_sum += r.input_tokens;
      out_sum += r.output_tokens;
    }
    const auto n = static_cast<double>(reqs.size());
    // Draws outside [1, max] are clipped; say how many, so a distorted distribution shows.
    std::string clips;
    if (clipped.input > 0 || clipped.output > 0) {
      clips = fmt::format("; clipped to the valid range: {} input and {} output lengths",
                          clipped.input, clipped.output);
    }
    fmt::print(stderr,
               "kvsim gen: wrote {} requests to {} (span {:.3f} s, mean input {:.1f}, mean "
               "output {:.1f} tokens{})\n",
               reqs.size(), a.out == "-" ? "stdout" : a.out,
               static_cast<double>(reqs.back().arrival_ns) * 1e-9, in_sum / n, out_sum / n, clips);
  }
}

}  // namespace

void register_gen_command(CLI::App& app) {
  auto args = std::make_shared<GenArgs>();
  CLI::App* cmd = app.add_subcommand(
      "gen", "Generate a synthetic trace (kvsim JSONL), seeded and deterministic");
  TraceGenOptions& g = args->gen;
  cmd->add_option("-n,--num-requests", g.num_requests, "Number of requests")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option_function<std::string>(
         "--seed", [&g](const std::string& s) { g.seed = parse_u64("--seed", s); },
         "Random seed, 0 .. 2^64-1 (same seed, same bytes)")
      ->default_str("0");
  cmd->add_option("--arrival", args->arrival, "Arrival process")
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
  cmd->add_option("--input-len", args->input,
                  "Input length: fixed:N | uniform:LO,HI | normal:MEAN,SIGMA | "
                  "lognormal:MU,SIGMA | zipf:S,MAX | empirical:TRACE. Draws are rounded and "
                  "clipped to [1, 2^24]; normal/lognormal parameters that would clip more than 10 "
                  "% of them are refused, and the summary line counts the clipped draws")
      ->capture_default_str();
  cmd->add_option("--output-len", args->output, "Output length (same forms as --input-len)")
      ->capture_default_str();
  cmd->add_option("--prefix-groups", g.prefix_groups,
                  "Number of shared system prompts (0 = no shared prefixes)")
      ->check(non_negative());
  cmd->add_option("--prefix-tokens", g.prefix_tokens,
                  "Tokens per shared system prompt (added to each request's input length)")
      ->check(non_negative());
  cmd->add_option("--prefix-as", args->prefix_as, "Write shared prefixes as hash ids or token ids")
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
