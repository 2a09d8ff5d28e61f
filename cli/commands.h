// The kvsim subcommands. Each register_* adds one CLI11 subcommand whose callback does the work
// and stores its exit status through set_exit_code(). Errors that reach main() as exceptions are
// printed as one line "kvsim: error: ..." with exit status 2.
#pragma once

#include <CLI/CLI.hpp>

namespace kvsim::cli {

void register_plan_command(CLI::App& app);
void register_replay_command(CLI::App& app);
void register_gen_command(CLI::App& app);
void register_sweep_command(CLI::App& app);
void register_size_command(CLI::App& app);
// Only in builds with NLopt (KVSIM_HAVE_CALIBRATE).
void register_calibrate_command(CLI::App& app);

// Exit status of the command that ran (0 unless a command sets it).
void set_exit_code(int code);
int exit_code();

// Bad input, impossible configuration, a model that does not fit: exit status 2.
inline constexpr int kExitBadInput = 2;

}  // namespace kvsim::cli
