// The flags the grid commands (kvsim sweep, kvsim size) share: comma-separated list options,
// the execution flags that do not change results, --merge's rules and its inputs, and the
// settings given (run::GivenSettings) for the run room.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
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

// The start of a grid command: the subcommand, its TRACE and the model/card and trace flags
// (--max-model-len described by `max_model_len_help`).
CLI::App* add_grid_command(CLI::App& app, const char* name, const char* description,
                           std::string& trace_path, run::PlanOptions& plan, TraceReadOptions& trace,
                           const char* max_model_len_help);

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
