// TEMPORARY: replaced by the plan command's implementation (owner: see docs). Keeps kvsim linkable.
#include <stdexcept>

#include "commands.h"

namespace kvsim::cli {
void register_plan_command(CLI::App& app) {
  app.add_subcommand("plan", "(under construction)")->callback([] {
    throw std::runtime_error("'kvsim plan' is not built yet");
  });
}
}  // namespace kvsim::cli
