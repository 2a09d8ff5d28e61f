// kvsim: the command-line entry point (composition root; no logic lives here).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "interrupt.h"
#include "kvsim/core/param.h"
#include "validators.h"

namespace kvsim::cli {
namespace {
int g_exit_code = 0;
}
void set_exit_code(int code) {
  g_exit_code = code;
}
int exit_code() {
  return g_exit_code;
}
}  // namespace kvsim::cli

namespace {

// One error line on stderr, its parameters spelled as flags (core/param.h). Never throws:
// stderr itself may be unwritable (a full disk), and the exit status still says what happened.
void print_error(const char* text) {
  try {
    const std::string spelled = kvsim::spell_params(text, kvsim::ParamSpelling::kCli);
    std::fprintf(stderr, "kvsim: error: %s\n", spelled.c_str());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "kvsim: error: %s\n", text);
  }
  std::fflush(stderr);
}

// Output that never reached its destination (a full disk, a closed pipe) is a failure: flush and
// close stdout and report the first error. Returns the exit status to use.
int finish_stdout(int status) {
  std::cout.flush();
  const bool stream_failed = !std::cout;
  errno = 0;
  const bool flush_failed = std::fflush(stdout) != 0;
  const int flush_errno = errno;
  const bool had_error = std::ferror(stdout) != 0;
  const bool close_failed = std::fclose(stdout) != 0;
  if (stream_failed || flush_failed || had_error || close_failed) {
    const int err = flush_errno != 0 ? flush_errno : errno;
    const std::string text = std::string("writing standard output failed") +
                             (err != 0 ? std::string(": ") + std::strerror(err) : "");
    print_error(text.c_str());
    return kvsim::cli::kExitBadInput;
  }
  return status;
}

struct Command {
  const char* name;  // as the register function names it (checked in register_commands)
  void (*register_command)(CLI::App&);
};
constexpr Command kCommands[] = {
    {"plan", kvsim::cli::register_plan_command},
    {"replay", kvsim::cli::register_replay_command},
    {"gen", kvsim::cli::register_gen_command},
    {"sweep", kvsim::cli::register_sweep_command},
    {"size", kvsim::cli::register_size_command},
#ifdef KVSIM_HAVE_CALIBRATE
    {"calibrate", kvsim::cli::register_calibrate_command},
#endif
};

// The command named on the line: the first argument that is not a flag, or nullptr when there is
// none (the main help, --version). An unknown name is an error here: CLI11 acts on --help before
// it notices an unknown command, so `kvsim NOSUCHCOMMAND --help` printed the main help and
// exited 0.
const Command* named_command(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-') continue;  // the main app's flags take no value
    std::string names;
    for (const Command& c : kCommands) {
      if (std::strcmp(argv[i], c.name) == 0) return &c;
      names += (names.empty() ? "" : ", ") + std::string(c.name);
    }
    throw std::invalid_argument("unknown command '" + std::string(argv[i]) + "' (expected " +
                                names + ")");
  }
  return nullptr;
}

// Registers the named command only, or every command when none is named (the main help,
// --version). Registering a command's options is most of a short run's
// start-up (about 1 ms for all six); a command never sees the others.
void register_commands(CLI::App& app, int argc, char** argv) {
  const Command* named = named_command(argc, argv);
  for (const Command& c : kCommands) {
    if (named != nullptr && named != &c) continue;
    const size_t before = app.get_subcommands({}).size();
    c.register_command(app);
    const std::vector<CLI::App*> subs = app.get_subcommands({});
    if (subs.size() != before + 1 || subs.back()->get_name() != c.name) {
      throw std::logic_error(std::string("kvsim: command table entry '") + c.name +
                             "' does not register that command");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvsim: a simulator of vLLM's paged KV-cache allocator and scheduler"};
  app.require_subcommand(1, 1);
  app.set_version_flag("--version", "kvsim 0.1.0");
  kvsim::cli::install_interrupt_handlers();
  int status = 0;
  try {
    register_commands(app, argc, argv);
    kvsim::cli::apply_value_rules(app);
    app.parse(argc, argv);
    status = kvsim::cli::exit_code();
  } catch (const CLI::CallForHelp& e) {
    status = app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    status = app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    status = app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error(e.what());
    status = kvsim::cli::kExitBadInput;
  } catch (const kvsim::cli::Interrupted& e) {
    print_error(e.what());
    status = 128 + e.signal();
  } catch (const std::bad_alloc&) {
    print_error(
        "out of host memory: the configuration (pool size, trace, backend pool) is too large "
        "for this machine");
    status = kvsim::cli::kExitBadInput;
  } catch (const std::exception& e) {
    print_error(e.what());
    // A signal can surface wrapped (a sweep rethrows its runner's error with context).
    const int sig = kvsim::cli::interrupt_signal();
    status = sig != 0 ? 128 + sig : kvsim::cli::kExitBadInput;
  }
  const int final_status = finish_stdout(status);
  return status != 0 ? status : final_status;
}
