// TEMPORARY: replaced by the replay command's implementation (owner: see docs). Keeps kvsim linkable.
#include <stdexcept>

#include "commands.h"

namespace kvsim::cli {
void register_replay_command(CLI::App& app) {
  app.add_subcommand("replay", "(under construction)")->callback([] {
    throw std::runtime_error("'kvsim replay' is not built yet");
  });
}
}  // namespace kvsim::cli
