#include "option_batch.h"

namespace kvsim::cli::detail {

void check_batch_names(const std::vector<CLI::Option_p>& earlier,
                       const std::vector<CLI::Option_p>& added) {
  // The batch's names (few) in sets; each earlier name is looked up, not copied.
  std::unordered_set<std::string> short_names;
  std::unordered_set<std::string> long_names;
  for (const CLI::Option_p& o : added) {
    short_names.insert(o->get_snames().begin(), o->get_snames().end());
    long_names.insert(o->get_lnames().begin(), o->get_lnames().end());
  }
  for (const CLI::Option_p& o : earlier) {
    for (const std::string& s : o->get_snames()) {
      if (short_names.contains(s)) throw CLI::OptionAlreadyAdded("-" + s);
    }
    for (const std::string& l : o->get_lnames()) {
      if (long_names.contains(l)) throw CLI::OptionAlreadyAdded("--" + l);
    }
  }
}

}  // namespace kvsim::cli::detail
