// Fuzz target: kvsim's command-line parser (every subcommand's flags, validators and list
// parsers) on arguments cut from arbitrary bytes at NULs. The commands' work is replaced by a
// no-op, so only parsing runs. On success exactly one subcommand was chosen.
//
// The app is built once per process: building kvsim's ~150 options took ~0.3 s per input under
// ASan and coverage (CLI11 checks every new option's names against all earlier ones), i.e. 3
// inputs per second. CLI11's parse() clears the previous parse's results; the variables the
// options write to keep their last values, but parsing only writes them, so an input's outcome
// does not depend on the inputs before it.
#include <cstdint>
#include <exception>
#include <functional>
#include <new>
#include <string>
#include <utility>
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

namespace {

// A subcommand's option storage lives in the captures of its callback (a shared_ptr), so the
// callback must outlive the parses even though the harness replaces it with a no-op: replacing it
// through App::callback() alone destroys the storage the options still write to. CLI11 keeps the
// callback in a protected member; a derived class may name it.
struct CallbackAccess : CLI::App {
  static std::function<void()> take(CLI::App& app) {
    return std::exchange(app.*(&CallbackAccess::final_callback_), {});
  }
};

// kvsim's CLI as main.cpp builds it, each subcommand's work replaced by a counter.
class Cli {
 public:
  Cli() {
    app_.require_subcommand(1, 1);
    app_.set_version_flag("--version", "kvsim");
    kvsim::cli::register_plan_command(app_);
    kvsim::cli::register_replay_command(app_);
    kvsim::cli::register_gen_command(app_);
    kvsim::cli::register_sweep_command(app_);
    kvsim::cli::register_size_command(app_);
    kvsim::cli::apply_value_rules(app_);
    for (CLI::App* sub : app_.get_subcommands({})) {
      commands_.push_back(CallbackAccess::take(*sub));
      sub->callback([this] { ++chosen_; });
    }
  }
  // Subcommands chosen by a successful parse of `args` (argv without the program name); throws
  // what CLI11 throws for a refused command line.
  int parse(const std::vector<std::string>& args) {
    chosen_ = 0;
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes argv reversed
    app_.parse(reversed);
    return chosen_;
  }

 private:
  std::vector<std::function<void()>> commands_;  // declared first: destroyed after the app
  CLI::App app_{"kvsim"};
  int chosen_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Cli cli;
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
  int chosen = 0;
  try {
    chosen = cli.parse(args);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception&) {
    return 0;  // a refusal (CLI11's parse errors, --help, --version)
  }
  KVSIM_FUZZ_CHECK(chosen == 1);
  return 0;
}
