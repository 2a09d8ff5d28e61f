// KvLedger: the host-side record of what every KV slot must contain, shared by both backends.
//
// For each device slot (block * block_size + offset) and each host swap slot, the ledger holds
// the (request, position) of the last token written there, or request -1 (never written: the
// slot must still be poison). apply() replays a StepBatch's effects in execution order:
// swap_out, swap_in, copies, writes (reads change nothing). The backends then compare the real
// pool with it in verify().
//
// validate() rejects batches the kernels cannot execute safely: block_size different from the
// pool's, slots/blocks/host slots out of range, slot_mapping shorter than the writes' tokens (or
// longer with anything but kPadSlotId), malformed block-table CSR, tables too short for seq_len.
// Two writes to one slot in one step, or a copy whose dst is another pair's src, have no defined
// order on a GPU (nor in vLLM); the ledger assumes the batch is free of such races.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kvsim/core/kv_backend.h"
#include "kvsim/core/step_batch.h"
#include "kvsim/cuda/kv_layout.h"

namespace kvsim {

// A host-slot-major swap area: host slot s holds one block's every (layer, part) page at
// [s * block_bytes_all_layers + (layer * num_parts + part) * page_bytes, ...).
struct SwapCopy {
  int64_t pool_offset = 0;
  int64_t host_offset = 0;
  int64_t bytes = 0;
};
// One SwapCopy per (swap, layer, part), in that order.
void build_swap_copies(const KvCacheLayout& layout, std::span<const BlockSwap> swaps,
                       std::vector<SwapCopy>& out);

// Bytes each phase moves (reads + writes counted separately), as the backends report them.
StepExecution step_traffic(const KvCacheLayout& layout, const StepBatch& batch);

class KvLedger {
 public:
  KvLedger(const KvCacheLayout& layout, int64_t host_swap_slots);

  // Throws std::invalid_argument: "step S: <field>[i] = value out of range [lo, hi)".
  void validate(const StepBatch& batch) const;
  // Per written token (slot_mapping order): its request id (-1 for padding) and position.
  void expand_tokens(const StepBatch& batch, std::vector<int64_t>& token_request,
                     std::vector<int32_t>& token_position) const;
  void apply(const StepBatch& batch);

  const std::vector<int64_t>& slot_request() const { return slot_request_; }
  const std::vector<int32_t>& slot_position() const { return slot_position_; }
  int64_t host_swap_slots() const { return host_swap_slots_; }
  int64_t written_slots() const;

 private:
  KvCacheLayout layout_;
  int64_t host_swap_slots_;
  std::vector<int64_t> slot_request_;
  std::vector<int32_t> slot_position_;
  std::vector<int64_t> host_request_;
  std::vector<int32_t> host_position_;
  std::vector<int64_t> scratch_request_;
  std::vector<int32_t> scratch_position_;
};

// The verify() result from a verification pass: `bad` mismatching elements, the first at
// ops::VerifyVecOp item `first_bad_item` (ignored when bad == 0).
BackendVerification make_verification(const KvCacheLayout& layout, const KvLedger& ledger,
                                      int64_t bad, int64_t first_bad_item);

}  // namespace kvsim
