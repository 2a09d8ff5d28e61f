// `kvsim plan --json`: the plan as one JSON object. Key names are relied on by other tools (see
// docs/planner.md); the Python package (python/) exposes the same object, so both read it here.
#pragma once

#include <nlohmann/json.hpp>

#include "kvsim/core/planner.h"

namespace kvsim::cli {

// Keys in a fixed order; optional results (concurrency, max_context_tokens,
// vllm_max_context_tokens) appear only when set.
nlohmann::ordered_json plan_to_json(const Plan& p);

}  // namespace kvsim::cli
