// TEMPORARY: replaced by the sweep command's implementation (owner: see docs). Keeps kvsim linkable.
#include <stdexcept>

#include "commands.h"

namespace kvsim::cli {
void register_sweep_command(CLI::App& app) {
  app.add_subcommand("sweep", "(under construction)")->callback([] {
    throw std::runtime_error("'kvsim sweep' is not built yet");
  });
}
}  // namespace kvsim::cli
