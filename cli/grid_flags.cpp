#include "grid_flags.h"

#include <stdexcept>

#include <fmt/core.h>

#include "kvsim/run/grid_values.h"
#include "kvsim/sim/io/line_reader.h"
#include "plan_flags.h"
#include "trace_flags.h"
#include "validators.h"

namespace kvsim::cli {

CLI::Option* add_list_option(CLI::App* cmd, const char* flag, const char* help,
                             std::function<void(const std::string&)> parse) {
  return cmd
      ->add_option_function<std::vector<std::string>>(
          flag,
          [parse](const std::vector<std::string>& values) {
            for (const std::string& v : values) parse(v);
          },
          help)
      ->allow_extra_args(false)
      ->type_name("LIST");
}

CLI::Option* add_int32_list_option(CLI::App* cmd, const char* flag, std::string_view param_id,
                                   const char* help, std::vector<int32_t>& into) {
  return add_list_option(
      cmd, flag, help, [flag, id = std::string(param_id), &into](const std::string& s) {
        const std::vector<int32_t> v = run::to_int32_values(id, parse_int_list(flag, s));
        into.insert(into.end(), v.begin(), v.end());
      });
}

CLI::Option* add_kv_cache_dtype_list_option(CLI::App* cmd, const char* flag,
                                            std::string_view param_id, const char* help,
                                            std::vector<std::string>& into) {
  return add_list_option(cmd, flag, help,
                         [flag, id = std::string(param_id), &into](const std::string& s) {
                           for (const std::string& d : split_list(flag, s)) {
                             run::check_kv_cache_dtype(id, d);
                             into.push_back(d);
                           }
                         });
}

CLI::App* add_grid_command(CLI::App& app, const GridCommandText& text, std::string& trace_path,
                           run::PlanOptions& plan, TraceReadOptions& trace) {
  CLI::App* cmd = app.add_subcommand(text.name, text.description);
  cmd->add_option("TRACE", trace_path, "Trace file (any format kvsim replay reads)");
  add_model_card_options(cmd, plan);
  cmd->get_option("--max-model-len")->description(text.max_model_len_help);
  add_trace_options(cmd, trace);
  return cmd;
}

const char* add_parallel_options(CLI::App* cmd, int32_t& jobs, const char* jobs_help,
                                 std::string& shard, const char* shard_help) {
  const char* group = "Execution and output";
  cmd->add_option("--jobs,-j", jobs, jobs_help)
      ->check(positive())
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--shard", shard, shard_help)->group(group);
  return group;
}

bool is_execution_flag(const std::string& name, std::initializer_list<std::string_view> outputs) {
  for (std::string_view f : {"--jobs", "--shard", "--quiet", "--merge", "--help"}) {
    if (name == f) return true;
  }
  for (std::string_view f : outputs) {
    if (name == f) return true;
  }
  return false;
}

void check_merge_flags(const CLI::App& cmd, const std::string& trace_path, std::string_view files,
                       std::string_view what,
                       const std::function<bool(const std::string&)>& allowed,
                       std::string_view files_and_flags) {
  if (!trace_path.empty()) {
    throw std::invalid_argument(fmt::format("--merge takes {} files, not a TRACE", files));
  }
  for (const CLI::Option* opt : cmd.get_options()) {
    if (opt->count() > 0 && !allowed(opt->get_name())) {
      throw std::invalid_argument(
          fmt::format("--merge takes only {} (got {}); the {} flags were fixed when the shards ran",
                      files_and_flags, opt->get_name(), what));
    }
  }
}

std::vector<NamedText> read_merge_inputs(const std::vector<std::string>& paths) {
  InputLimits limits;
  limits.has_flags = false;
  std::vector<NamedText> shards;
  for (const std::string& path : paths) shards.push_back({path, read_text_file(path, limits)});
  return shards;
}

run::GivenSettings given_settings(const CLI::App& cmd) {
  run::GivenSettings given;
  for (const CLI::Option* opt : cmd.get_options()) {
    std::string name = opt->get_name();
    if (opt->count() == 0 || !name.starts_with("--")) continue;
    name.erase(0, name.starts_with("--no-") ? 5 : 2);
    for (char& c : name) c = c == '-' ? '_' : c;
    given[name] =
        opt->get_expected_max() == 0 || opt->results().empty() ? "" : opt->results().front();
  }
  return given;
}

}  // namespace kvsim::cli
