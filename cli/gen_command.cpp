// TEMPORARY: replaced by the gen command's implementation (owner: see docs). Keeps kvsim linkable.
#include <stdexcept>

#include "commands.h"

namespace kvsim::cli {
void register_gen_command(CLI::App& app) {
  app.add_subcommand("gen", "(under construction)")->callback([] {
    throw std::runtime_error("'kvsim gen' is not built yet");
  });
}
}  // namespace kvsim::cli
