// Parameters named inside error messages.
//
// The rooms below the front ends do not know whether the user typed `--block-size 0` (CLI) or
// `block_size=0` (Python). A message therefore names a parameter by its id — vLLM's
// engine-argument name where vLLM has the setting (block_size, max_model_len, ...), else kvsim's
// keyword (block_sizes, step_time, merge) — wrapped in markers, and each front end spells the
// whole message once, where it shows it (spell_params). The markers are ASCII control
// characters that no parameter value or file name in a message carries; exceptions keep them
// through any number of "context: " prefixes added on the way up.
//
// Contract: an id is lower_snake_case. The CLI spells id `a_b` as `--a-b`; Python as `a_b=`.
#pragma once

#include <string>
#include <string_view>

namespace kvsim {

// A parameter by name: CLI "--block-size", Python "block_size=", neutral "block_size".
std::string param(std::string_view id);
// A parameter with the value the user gave, written as it should read:
// CLI "--step-time 'x'", Python "step_time='x'", neutral "step_time='x'".
std::string param(std::string_view id, std::string_view value);
// A boolean setting: CLI "--id" / "--no-id", Python "id=True" / "id=False", neutral the same as
// Python.
std::string param_flag(std::string_view id, bool on);

enum class ParamSpelling { kNeutral, kCli, kPython };

// `message` with every parameter marker replaced by its spelling; text without markers is
// returned unchanged.
std::string spell_params(std::string_view message, ParamSpelling spelling);

}  // namespace kvsim
