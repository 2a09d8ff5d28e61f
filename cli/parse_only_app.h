// kvsim's command line as main.cpp builds it, each subcommand's work replaced by a counter: the
// CLI fuzz target and the flag-walking test parse with it without running a command.
//
// The user must define kvsim::cli::set_exit_code / exit_code (main.cpp's, not linked there).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "validators.h"

namespace kvsim::cli {

class ParseOnlyApp {
 public:
  ParseOnlyApp() {
    app_.require_subcommand(1, 1);
    app_.set_version_flag("--version", "kvsim");
    register_plan_command(app_);
    register_replay_command(app_);
    register_gen_command(app_);
    register_sweep_command(app_);
    register_size_command(app_);
#ifdef KVSIM_HAVE_CALIBRATE
    register_calibrate_command(app_);
#endif
    apply_value_rules(app_);
    for (CLI::App* sub : app_.get_subcommands({})) {
      commands_.push_back(CallbackAccess::take(*sub));
      sub->callback([this] { ++chosen_; });
    }
  }
  ParseOnlyApp(const ParseOnlyApp&) = delete;
  ParseOnlyApp& operator=(const ParseOnlyApp&) = delete;

  // Subcommands chosen by a successful parse of `args` (argv without the program name); throws
  // what CLI11 throws for a refused command line. CLI11's parse() clears the previous parse's
  // results, so one app serves many parses.
  int parse(const std::vector<std::string>& args) {
    chosen_ = 0;
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes argv reversed
    app_.parse(reversed);
    return chosen_;
  }
  CLI::App& app() { return app_; }

 private:
  // A subcommand's option storage lives in the captures of its callback (a shared_ptr), so the
  // callback must outlive the parses: replacing it through App::callback() alone would destroy
  // the storage the options still write to. CLI11 keeps it in a protected member.
  struct CallbackAccess : CLI::App {
    static std::function<void()> take(CLI::App& app) {
      return std::exchange(app.*(&CallbackAccess::final_callback_), {});
    }
  };

  std::vector<std::function<void()>> commands_;  // declared first: destroyed after the app
  CLI::App app_{"kvsim"};
  int chosen_ = 0;
};

}  // namespace kvsim::cli
