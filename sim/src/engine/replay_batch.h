// Internal: turns one SchedulerOutput into a StepBatch (vLLM worker semantics: the slot mapping
// of vllm/v1/worker/block_table.py BlockTable.compute_slot_mapping, built for each step by
// vllm/v1/worker/gpu_model_runner.py GPUModelRunner._prepare_inputs).
#pragma once

#include "kvsim/core/kv_cache_manager.h"
#include "kvsim/core/step_batch.h"
#include "kvsim/sim/sched/scheduler.h"

namespace kvsim::detail {

// Fills `batch` (cleared first): one write per scheduled request covering positions
// [num_computed, num_computed + n) with slot = block_table[pos / bs] * bs + pos % bs, and one
// read per scheduled request over its first num_computed + n tokens with the block-table prefix
// that covers them; the step's swap_out/swap_in lists as the scheduler emitted them. Coordinated
// (hybrid or window) layouts fill batch.groups, one slot mapping and table set per KV cache group
// (null blocks where a window group dropped a block), instead of the top-level ones. Must run after
// schedule() and before update_from_output() frees anything.
void build_step_batch(const SchedulerOutput& out, const KVCacheManager& kv, StepBatch& batch);

}  // namespace kvsim::detail
