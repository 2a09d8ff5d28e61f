// The flags the grid commands (kvsim sweep, kvsim size) share: comma-separated list options,
// the execution flags that do not change results, --merge's rules and its inputs, and the
// settings given (run::GivenSettings) for the run room.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "kvsim/run/size_job.h"
#include "kvsim/sim/sweep/sweep.h"

namespace kvsim::cli {

// A list option: one comma-separated list per occurrence, split by `parse` (called for each
// occurrence in order), not by CLI11, so an empty item (",16", "16,,32") is an error; a flag
// given twice appends (so the grid's duplicate check sees both).
CLI::Option* add_list_option(CLI::App* cmd, const char* flag, const char* help,
                             std::function<void(const std::string&)> parse);

// A list of positive 32-bit integers (parse_int_list, then run::to_int32_values, `param_id`
// naming the parameter in range errors), appended to `into`.
CLI::Option* add_int32_list_option(CLI::App* cmd, const char* flag, std::string_view param_id,
                                   const char* help, std::vector<int32_t>& into);
// A list of KV cache dtypes, each refused as it is parsed (before anything runs) when vLLM does
// not know it.
CLI::Option* add_kv_cache_dtype_list_option(CLI::App* cmd, const char* flag,
                                            std::string_view param_id, const char* help,
                                            std::vector<std::string>& into);

// A grid command's texts: its name, its description, and its --max-model-len help.
struct GridCommandText {
  const char* name;
  const char* description;
  const char* max_model_len_help;
};

// The start of a grid command: the subcommand, its TRACE and the model/card and trace flags.
CLI::App* add_grid_command(CLI::App& app, const GridCommandText& text, std::string& trace_path,
                           run::PlanOptions& plan, TraceReadOptions& trace);

// The same, with the command's options made here (they live as long as the callback that holds
// the returned pointer): Options has `trace_path` and a `job` with `plan` and `trace`.
template <typename Options>
std::pair<CLI::App*, std::shared_ptr<Options>> add_grid_command(CLI::App& app,
                                                                const GridCommandText& text) {
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = add_grid_command(app, text, opts->trace_path, opts->job.plan, opts->job.trace);
  return {cmd, opts};
}

// --jobs/-j (threads, > 0) and --shard I/N, first in the group "Execution and output", whose
// name it returns for the command's other execution and output flags.
const char* add_parallel_options(CLI::App* cmd, int32_t& jobs, const char* jobs_help,
                                 std::string& shard, const char* shard_help);

// Flags that do not change a grid command's results (kept out of its fingerprint): --jobs,
// --shard, --quiet, --merge, --help, and the command's `outputs` (e.g. --csv).
bool is_execution_flag(const std::string& name, std::initializer_list<std::string_view> outputs);

// --merge takes files, not a TRACE, and no flag outside `allowed`: throws std::invalid_argument
// "--merge takes <files_and_flags> (got --FLAG); the <what> flags were fixed when the shards ran".
void check_merge_flags(const CLI::App& cmd, const std::string& trace_path, std::string_view files,
                       std::string_view what,
                       const std::function<bool(const std::string&)>& allowed,
                       std::string_view files_and_flags);

// The shard files, read whole under the default input limits (a --merge of /dev/zero stops
// with its name).
std::vector<NamedText> read_merge_inputs(const std::vector<std::string>& paths);

// The settings given on `cmd`'s command line by parameter id ("--no-enable-prefix-caching" ->
// enable_prefix_caching), each with its value as typed ("" for a flag).
run::GivenSettings given_settings(const CLI::App& cmd);

}  // namespace kvsim::cli
