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
//
// Hybrid KV layouts (group_num_layers has more than one entry, or one group on the batch's
// `groups` path): the pool's layers are vLLM's KV cache tensors, each shared by one layer of
// every group (vLLM 0.26 kv_cache_utils: one tensor per position in a group, groups of equal page
// size). A block belongs to one group at a time, so a slot's last write names its group too:
// group g writes layers [0, group_num_layers[g]) of the slot with the values of seed layers
// g * num_layers + j. Batches must then carry one GroupStepTables per group and no top-level
// tables.
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

// Group g's slot mapping and block tables: batch.groups[g], or the top-level ones when the batch
// has no groups (then g must be 0).
struct GroupTablesView {
  std::span<const int64_t> slot_mapping;
  std::span<const int32_t> block_table_offsets;
  std::span<const BlockId> block_tables;
};
GroupTablesView group_tables(const StepBatch& batch, size_t group);

// Bytes each phase moves (reads + writes counted separately), as the backends report them.
// Hybrid layouts pass the groups' layer counts: group g's writes and reads move n_g layers, and a
// window group reads only its table's non-null entries.
StepExecution step_traffic(const KvCacheLayout& layout, const StepBatch& batch,
                           std::span<const int32_t> group_num_layers = {});

class KvLedger {
 public:
  // group_num_layers: empty for one full-attention group (every layer, top-level tables); else
  // the layer count of each KV cache group, each in [1, layout.num_layers].
  KvLedger(const KvCacheLayout& layout, int64_t host_swap_slots,
           std::vector<int32_t> group_num_layers = {});

  // Throws std::invalid_argument: "step S: <field>[i] = value out of range [lo, hi)".
  void validate(const StepBatch& batch) const;
  // Per written token (slot_mapping order): its request id (-1 for padding) and position.
  void expand_tokens(const StepBatch& batch, std::vector<int64_t>& token_request,
                     std::vector<int32_t>& token_position) const;
  void apply(const StepBatch& batch);

  const std::vector<int64_t>& slot_request() const { return slot_request_; }
  const std::vector<int32_t>& slot_position() const { return slot_position_; }
  // Grouped layouts only (else empty): the group of each slot's last write, and each group's
  // layer count.
  const std::vector<int32_t>& slot_group() const { return slot_group_; }
  const std::vector<int32_t>& group_num_layers() const { return group_num_layers_; }
  bool grouped() const { return !group_num_layers_.empty(); }
  // Groups the batches carry tables for (1 without groups).
  size_t num_groups() const { return grouped() ? group_num_layers_.size() : 1; }
  // Layers group g writes.
  int32_t layers_of_group(size_t g) const {
    return grouped() ? group_num_layers_[g] : layout_.num_layers;
  }
  int64_t host_swap_slots() const { return host_swap_slots_; }
  int64_t written_slots() const;

 private:
  void validate_tables(const StepBatch& b, size_t group, int64_t tokens) const;

  KvCacheLayout layout_;
  int64_t host_swap_slots_;
  std::vector<int64_t> slot_request_;
  std::vector<int32_t> slot_position_;
  std::vector<int32_t> group_num_layers_;
  std::vector<int32_t> slot_group_;
  std::vector<int64_t> host_request_;
  std::vector<int32_t> host_position_;
  std::vector<int32_t> host_group_;
  std::vector<int64_t> scratch_request_;
  std::vector<int32_t> scratch_position_;
};

// The verify() result from a verification pass: `bad` mismatching elements, the first at
// ops::VerifyVecOp item `first_bad_item` (ignored when bad == 0).
BackendVerification make_verification(const KvCacheLayout& layout, const KvLedger& ledger,
                                      int64_t bad, int64_t first_bad_item);

}  // namespace kvsim
