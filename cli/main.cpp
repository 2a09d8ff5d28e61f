// kvsim: the command-line entry point (composition root; no logic lives here).
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "commands.h"

namespace kvsim::cli {
namespace {
int g_exit_code = 0;
}
void set_exit_code(int code) { g_exit_code = code; }
int exit_code() { return g_exit_code; }
}  // namespace kvsim::cli

int main(int argc, char** argv) {
  CLI::App app{"kvsim: a simulator of vLLM's paged KV-cache allocator and scheduler"};
  app.require_subcommand(1, 1);
  app.set_version_flag("--version", "kvsim 0.1.0");
  kvsim::cli::register_plan_command(app);
  kvsim::cli::register_replay_command(app);
  kvsim::cli::register_gen_command(app);
  kvsim::cli::register_sweep_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "kvsim: error: {}\n", e.what());
    return kvsim::cli::kExitBadInput;
  } catch (const std::exception& e) {
    fmt::print(stderr, "kvsim: error: {}\n", e.what());
    return kvsim::cli::kExitBadInput;
  }
  return kvsim::cli::exit_code();
}
