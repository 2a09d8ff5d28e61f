// Registering a command's options in batches, for start-up time.
//
// CLI11 2.1's add_option compares the new option with every option the command already has, and
// each comparison copies the compared name lists (detail::find_member takes them by value): the
// replay command's ~80 options cost ~2M instructions there, most of a short replay's start-up
// (~0.1 ms of every replay; issue 27). add_options_in_batch() runs a registration with the
// command's earlier options set aside, so each add compares with the batch's own options only,
// then refuses a name the batch shares with an earlier option (by a hash of names, as add_option
// would have refused it; the batch's options are then dropped) and puts the options back in
// registration order (the help lists them
// in that order).
//
// Contract: `add` only adds options to `cmd` (no lookup, removal or option group: the earlier
// options are not there while it runs). Options that ignore case or underscores are compared
// exactly here, where CLI11 folds them: kvsim declares none.
#pragma once

#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace kvsim::cli {

namespace detail {
// CLI11 keeps a command's options in a protected member.
struct OptionsAccess : CLI::App {
  static std::vector<CLI::Option_p>& of(CLI::App& app) { return app.*(&OptionsAccess::options_); }
};
// Throws CLI::OptionAlreadyAdded when an option of `added` shares a short or long name with one
// of `earlier` (CLI11 compared the options of `added` with each other as they were added).
void check_batch_names(const std::vector<CLI::Option_p>& earlier,
                       const std::vector<CLI::Option_p>& added);
}  // namespace detail

template <class AddOptions>
void add_options_in_batch(CLI::App& cmd, AddOptions&& add) {
  std::vector<CLI::Option_p>& options = detail::OptionsAccess::of(cmd);
  std::vector<CLI::Option_p> earlier = std::exchange(options, {});
  // Whatever happens, the earlier options end up in front again.
  struct Restore {
    std::vector<CLI::Option_p>& options;
    std::vector<CLI::Option_p>& earlier;
    ~Restore() {
      for (CLI::Option_p& o : options) earlier.push_back(std::move(o));
      options = std::move(earlier);
    }
  } restore{options, earlier};
  std::forward<AddOptions>(add)();
  try {
    detail::check_batch_names(earlier, options);
  } catch (const CLI::OptionAlreadyAdded&) {
    options.clear();  // as CLI11 refuses a clash: nothing of the batch is added
    throw;
  }
}

}  // namespace kvsim::cli
