// Fuzz target: kvsim's command-line parser (every subcommand's flags, validators and list
// parsers) on arguments cut from arbitrary bytes at NULs. The commands' work is replaced by a
// no-op, so only parsing runs. On success exactly one subcommand was chosen.
#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "../cli/commands.h"
#include "../cli/validators.h"
#include "fuzz_check.h"

// The CLI's exit-status store lives in main.cpp, which the fuzzer does not link.
namespace kvsim::cli {
void set_exit_code(int) {}
int exit_code() {
  return 0;
}
}  // namespace kvsim::cli

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args;
  std::string cur;
  for (size_t i = 0; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  args.push_back(cur);
  CLI::App app{"kvsim"};
  app.require_subcommand(1, 1);
  kvsim::cli::register_plan_command(app);
  kvsim::cli::register_replay_command(app);
  kvsim::cli::register_gen_command(app);
  kvsim::cli::register_sweep_command(app);
  kvsim::cli::apply_value_rules(app);
  int chosen = 0;
  for (CLI::App* sub : app.get_subcommands({})) sub->callback([&chosen] { ++chosen; });
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes argv reversed
  try {
    app.parse(reversed);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception&) {
    return 0;
  }
  KVSIM_FUZZ_CHECK(chosen == 1);
  return 0;
}
