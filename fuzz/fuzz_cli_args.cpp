// Fuzz target: kvsim's command-line parser (every subcommand's flags, validators and list
// parsers) on arguments cut from arbitrary bytes at NULs. The commands' work is replaced by a
// no-op, so only parsing runs. On success exactly one subcommand was chosen, and every integer
// flag's value reaches CLI11's conversion as canonical decimal text (the strict number rule
// reached no range-checked flag once: "--max-requests 010" was octal 8).
//
// The app is built once per process: building kvsim's ~150 options took ~0.3 s per input under
// ASan and coverage (CLI11 checks every new option's names against all earlier ones), i.e. 3
// inputs per second. The variables the options write to keep their last values, but parsing
// only writes them, so an input's outcome does not depend on the inputs before it.
#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "../cli/parse_only_app.h"
#include "fuzz_check.h"
#include "kvsim/sim/io/parse_number.h"

// The CLI's exit-status store lives in main.cpp, which the fuzzer does not link.
namespace kvsim::cli {
void set_exit_code(int) {}
int exit_code() {
  return 0;
}
}  // namespace kvsim::cli

namespace {

// Each given integer option's value is what parse_integer prints back: no 0x, octal, blanks.
bool integers_are_canonical(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands()) {
    for (const CLI::Option* opt : sub->get_options()) {
      const std::string type = opt->get_type_name();
      const std::string base = type.substr(0, type.find(':'));
      if (opt->count() == 0 || (base != "INT" && base != "UINT")) continue;
      for (const std::string& r : opt->results()) {
        int64_t v = 0;
        if (kvsim::parse_integer(r, v) != kvsim::ParseStatus::kOk || std::to_string(v) != r) {
          return false;
        }
      }
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static kvsim::cli::ParseOnlyApp cli;
  std::vector<std::string> args;
  std::string cur;
  for (size_t i = 0; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  args.push_back(cur);
  int chosen = 0;
  try {
    chosen = cli.parse(args);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception&) {
    return 0;  // a refusal (CLI11's parse errors, --help, --version)
  }
  KVSIM_FUZZ_CHECK(chosen == 1);
  KVSIM_FUZZ_CHECK(integers_are_canonical(cli.app()));
  return 0;
}
