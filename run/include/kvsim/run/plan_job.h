// `plan`: the capacity plan of one model on one card (core/planner.h), from the settings both
// front ends take, and its JSON form (`kvsim plan --json`, `kvsim.plan()`). Key names are relied
// on by other tools (docs/planner.md).
#pragma once

#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

#include "kvsim/core/planner.h"
#include "kvsim/run/plan_options.h"

namespace kvsim::run {

struct PlanJobOptions {
  PlanOptions plan;
  std::optional<int64_t> concurrency;  // also report the longest context each can hold
  // The scheduler settings a hybrid model's windowed groups are sized by.
  std::optional<int64_t> max_num_batched_tokens;
  std::optional<int64_t> max_num_seqs;
  bool async_scheduling = true;  // vLLM 0.26's default: two batches in flight
};

// resolve_plan_inputs + compute_plan. Throws naming the parameter (core/param.h), or
// DoesNotFitError when vLLM would refuse to start.
Plan run_plan(const PlanJobOptions& options);

// Keys in a fixed order; optional results (concurrency, max_context_tokens,
// vllm_max_context_tokens) appear only when set.
nlohmann::ordered_json plan_to_json(const Plan& p);

}  // namespace kvsim::run
