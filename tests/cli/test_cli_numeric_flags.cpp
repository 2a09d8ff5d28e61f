// Every numeric flag of every command follows one rule, found by walking the CLI11 app itself
// (so a flag added later is covered without editing this test): integers are decimal only (no
// 0x, no octal, no blanks, nothing above 2^63 - 1), numbers refuse hex floats, inf and nan, and
// the error quotes the text as typed. Flags whose value is text with numbers inside (lists,
// seeds, I/N, fixed:MS, NAME=USD, length distributions) are listed by name, so a new text flag
// fails here until someone says which kind it is.
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../../cli/parse_only_app.h"
#include "cli_run.h"

// main.cpp's exit-status store, which this test does not link.
namespace kvsim::cli {
void set_exit_code(int) {}
int exit_code() {
  return 0;
}
}  // namespace kvsim::cli

namespace {

using kvsim_cli_test::cat;
using kvsim_cli_test::CliRun;
using kvsim_cli_test::run_kvsim;

struct ValueFlag {
  std::string command;
  std::string flag;
  std::string type;  // CLI11's conversion type: INT, UINT, FLOAT, TEXT, LIST, ...
};

std::vector<ValueFlag> value_flags(kvsim::cli::ParseOnlyApp& cli) {
  std::vector<ValueFlag> out;
  for (CLI::App* sub : cli.app().get_subcommands({})) {
    for (const CLI::Option* opt : sub->get_options()) {
      if (opt->get_expected_max() == 0 || !opt->nonpositional()) continue;
      const std::string full = opt->get_type_name();
      out.push_back({sub->get_name(), opt->get_name(), full.substr(0, full.find(':'))});
    }
  }
  return out;
}

bool is_numeric(const ValueFlag& f) {
  return f.type == "INT" || f.type == "UINT" || f.type == "FLOAT";
}

// Text flags without numbers.
const std::set<std::string> kWordFlags = {"--model",
                                          "--config",
                                          "--dtype",
                                          "--gpu",
                                          "--gpu-spec",
                                          "--quantization",
                                          "--format",
                                          "--arrival",
                                          "--router",
                                          "--json",
                                          "--timeline",
                                          "--requests",
                                          "--metrics",
                                          "--vllm-log",
                                          "--output",
                                          "--csv",
                                          "--plot",
                                          "--merge",
                                          "--backend",
                                          "--preemption-mode",
                                          "--scheduling-policy",
                                          "--prefix-as",
                                          "--gpus",
                                          "--kv-cache-dtype",
                                          "--kv-cache-dtypes",
                                          "--fit",
                                          "--start",
                                          "--measured-vllm-version",
                                          "--vllm-version"};
// Text flags whose numbers are parsed while the command line is (lists, seeds): the walk tries
// them in process too.
const std::set<std::string> kParsedListFlags = {"--seed",
                                                "--router-seed",
                                                "--tp",
                                                "--block-sizes",
                                                "--max-num-seqs",
                                                "--max-num-batched-tokens",
                                                "--gpu-memory-utilizations",
                                                "--num-gpu-blocks",
                                                "--prefix-cache-retention-interval"};
// Text flags whose numbers are parsed when the command runs: tried through the binary below.
const std::set<std::string> kRunParsedFlags = {"--shard", "--step-time", "--input-len",
                                               "--output-len", "--gpu-price"};

// Refused by every integer flag; `what` is the expected message's tail.
struct Bad {
  const char* text;
  const char* what;
};
const Bad kBadIntegers[] = {
    {"0x10", "is not a decimal integer"},
    {"0X10", "is not a decimal integer"},
    {" 16", "is not a decimal integer"},
    {"16 ", "is not a decimal integer"},
    {"1e3", "is not a decimal integer"},
    {"1.5", "is not a decimal integer"},
    {"0b1", "is not a decimal integer"},
    {"--1", "is not a decimal integer"},
    {"9223372036854775808", "is out of range (at most 2^63 - 1)"},
    {"18446744073709551616", "is out of range (at most 2^63 - 1)"},
    {"99999999999999999999999", "is out of range (at most 2^63 - 1)"},
};
const Bad kBadNumbers[] = {
    {"0x1p4", "is not a finite decimal number"}, {"0x10", "is not a finite decimal number"},
    {"inf", "is not a finite decimal number"},   {"-inf", "is not a finite decimal number"},
    {"nan", "is not a finite decimal number"},   {"infinity", "is not a finite decimal number"},
    {" 1", "is not a finite decimal number"},    {"1 ", "is not a finite decimal number"},
    {"1e999", "is not a finite decimal number"}, {"1,5", "is not a finite decimal number"},
};

// `command flag=text` must be refused with "flag: 'text' what".
void expect_refused(kvsim::cli::ParseOnlyApp& cli, const ValueFlag& f, const std::string& text,
                    const std::string& what) {
  SCOPED_TRACE(cat({f.command, " ", f.flag, "='", text, "'"}));
  try {
    cli.parse({f.command, cat({f.flag, "=", text})});
    ADD_FAILURE() << "accepted";
  } catch (const CLI::ParseError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(f.flag), std::string::npos) << msg;
    EXPECT_NE(msg.find(cat({"'", text, "' ", what})), std::string::npos) << msg;
  }
}

TEST(CliNumericFlags, EveryFlagIsClassified) {
  kvsim::cli::ParseOnlyApp cli;
  int numeric = 0;
  for (const ValueFlag& f : value_flags(cli)) {
    if (is_numeric(f)) {
      ++numeric;
      continue;
    }
    EXPECT_TRUE(kWordFlags.count(f.flag) + kParsedListFlags.count(f.flag) +
                    kRunParsedFlags.count(f.flag) ==
                1)
        << f.command << " " << f.flag << " (" << f.type
        << "): a text flag this test does not know; say whether it carries numbers";
  }
  EXPECT_GT(numeric, 100);  // the walk found the flags (plan, replay, sweep, size, gen)
}

TEST(CliNumericFlags, EveryIntegerFlagTakesDecimalOnly) {
  kvsim::cli::ParseOnlyApp cli;
  for (const ValueFlag& f : value_flags(cli)) {
    if (f.type != "INT" && f.type != "UINT") continue;
    for (const Bad& b : kBadIntegers) expect_refused(cli, f, b.text, b.what);
    // "010" is ten, never octal eight: what reaches CLI11's conversion is the canonical text.
    SCOPED_TRACE(cat({f.command, " ", f.flag, "=010"}));
    try {
      std::vector<std::string> args = {f.command, cat({f.flag, "=010"})};
      if (f.command != "plan" && f.command != "gen") args.emplace_back("trace.csv");  // required
      if (f.command == "calibrate") args.emplace_back("--output=out.json");           // required
      cli.parse(args);
      const CLI::Option* opt = cli.app().get_subcommand(f.command)->get_option(f.flag);
      ASSERT_EQ(opt->results().size(), 1U);
      EXPECT_EQ(opt->results()[0], "10");
    } catch (const CLI::ParseError& e) {
      EXPECT_NE(std::string(e.what()).find("10"), std::string::npos) << e.what();  // a range
    }
  }
}

TEST(CliNumericFlags, EveryNumberFlagRefusesHexInfAndNan) {
  kvsim::cli::ParseOnlyApp cli;
  for (const ValueFlag& f : value_flags(cli)) {
    if (f.type != "FLOAT") continue;
    for (const Bad& b : kBadNumbers) expect_refused(cli, f, b.text, b.what);
  }
}

TEST(CliNumericFlags, EveryListAndSeedFlagRefusesLooseNumbers) {
  kvsim::cli::ParseOnlyApp cli;
  int tried = 0;
  for (const ValueFlag& f : value_flags(cli)) {
    if (kParsedListFlags.count(f.flag) == 0 || is_numeric(f)) continue;
    ++tried;
    std::vector<std::string> bad = {"0x10", " 16", "16 ", "1e999", "inf", "nan", "16,0x10"};
    if (f.flag != "--gpu-memory-utilizations") {  // the one list of numbers, not integers
      bad.insert(bad.end(), {"18446744073709551616", "99999999999999999999999", "1.5"});
    }
    for (const std::string& text : bad) {
      SCOPED_TRACE(cat({f.command, " ", f.flag, "='", text, "'"}));
      try {
        cli.parse({f.command, cat({f.flag, "=", text})});
        ADD_FAILURE() << "accepted";
      } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find(f.flag), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_GE(tried, 8);
}

// The flags whose numbers are parsed when the command runs, through the binary.
TEST(CliNumericFlags, RunParsedFlagsRefuseLooseNumbers) {
  const std::string trace = cat({KVSIM_SOURCE_DIR, "/tests/data/traces/azure_head.csv.gz"});
  const std::string replay = cat({"replay '", trace, "' --model qwen2.5-7b --no-progress "});
  struct Case {
    std::string args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {cat({"sweep '", trace, "' --model qwen2.5-7b --shard 0x1/2"}), "--shard"},
      {cat({"sweep '", trace, "' --model qwen2.5-7b --shard ' 1/2'"}), "--shard"},
      {cat({"sweep '", trace, "' --model qwen2.5-7b --shard 1/18446744073709551616"}), "--shard"},
      {cat({replay, "--step-time fixed:0x1p4"}), "--step-time"},
      {cat({replay, "--step-time fixed:inf"}), "--step-time"},
      {cat({replay, "--step-time fixed:nan"}), "--step-time"},
      {cat({replay, "--step-time 'fixed: 5'"}), "--step-time"},
      {cat({replay, "--step-time roofline:mfu=0x1p-1"}), "--step-time"},
      {"gen -n 2 --input-len uniform:0x10,20", "--input-len"},
      {"gen -n 2 --input-len 'fixed: 16'", "--input-len"},
      {"gen -n 2 --output-len normal:inf,1", "--output-len"},
      {"gen -n 2 --output-len 18446744073709551616", "--output-len"},
      {cat({"size '", trace, "' --model qwen2.5-7b --gpus l40s --tp 1 --slo-ttft-p99 1 ",
            "--slo-tpot-p99 1 --gpu-price l40s=0x1p4"}),
       "--gpu-price"},
      {cat({"size '", trace, "' --model qwen2.5-7b --gpus l40s --tp 1 --slo-ttft-p99 1 ",
            "--slo-tpot-p99 1 --gpu-price l40s=inf"}),
       "--gpu-price"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const CliRun r = run_kvsim(c.args);
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find(cat({"kvsim: error: ", c.message})), std::string::npos) << r.out;
  }
}

}  // namespace
