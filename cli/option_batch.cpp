#include "option_batch.h"

namespace kvsim::cli::detail {

void check_batch_names(const std::vector<CLI::Option_p>& earlier,
                       const std::vector<CLI::Option_p>& added) {
  // Each name as typed, "-x" or "--long" (CLI11 keeps them without the dashes).
  std::unordered_set<std::string> names;
  const auto each_name = [](const CLI::Option& o, auto&& fn) {
    for (const std::string& s : o.get_snames()) fn("-" + s);
    for (const std::string& l : o.get_lnames()) fn("--" + l);
  };
  for (const CLI::Option_p& o : earlier) {
    each_name(*o, [&names](std::string n) { names.insert(std::move(n)); });
  }
  for (const CLI::Option_p& o : added) {
    each_name(*o, [&names](const std::string& n) {
      if (names.contains(n)) {
        throw CLI::OptionAlreadyAdded(n);
      }
    });
  }
}

}  // namespace kvsim::cli::detail
