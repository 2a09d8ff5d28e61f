// StepBatch: everything one engine step asks the KV storage to do, as plain data.
//
// The simulator (sim) builds one StepBatch per step from the scheduler's output and hands it to a
// KvBackend. It is the contract between sim and the storage backends (cuda: device or host twin);
// neither side includes the other.
//
// Layout conventions (vLLM worker semantics):
//   * writes: one entry per scheduled request, tokens [first_position, first_position + num_tokens)
//     of that request are written this step; slot_mapping holds one slot per written token, in
//     the same order (entry 0's tokens first). slot = block_id * block_size + position %
//     block_size; kPadSlotId (-1) = skip.
//   * reads: every scheduled sequence attends over its first seq_len tokens through its block table
//     (CSR: block_table_offsets has reads.size() + 1 entries into block_tables).
//   * copies: (src, dst) block pairs copied on device before the writes (vLLM 0.26 full attention
//     emits none; kept for copy-on-write studies).
//   * swap_out / swap_in: device block <-> host slot transfers (kvsim's swap preemption mode, an
//     extension beyond vLLM 0.26). swap_out runs before copies/writes, swap_in after swap_out.
//   * groups (hybrid KV layouts only, vLLM's hybrid KV cache manager): every KV cache group has
//     its own block table per request, so its own slot mapping and block tables; writes and
//     reads (requests, positions, seq_len) are shared by all groups. When `groups` is non-empty
//     the top-level slot_mapping / block_table_offsets / block_tables are empty and unused. A
//     window group's table holds the null block (id 0) where vLLM dropped a block that fell out
//     of the window; those entries are not read.
#pragma once

#include <cstdint>
#include <vector>

#include "kvsim/core/types.h"

namespace kvsim {

struct TokenWrite {
  int64_t request_id = 0;
  int32_t first_position = 0;
  int32_t num_tokens = 0;
};

struct SequenceRead {
  int64_t request_id = 0;
  int32_t seq_len = 0;  // tokens attended over (computed + scheduled this step)
};

struct BlockCopy {
  BlockId src = 0;
  BlockId dst = 0;
};

struct BlockSwap {
  BlockId device_block = 0;
  int64_t host_slot = 0;
};

// One KV cache group's part of a step (StepBatch::groups[g] is group g).
struct GroupStepTables {
  std::vector<int64_t> slot_mapping;         // as StepBatch::slot_mapping, through group g's tables
  std::vector<int32_t> block_table_offsets;  // as StepBatch::block_table_offsets
  std::vector<BlockId> block_tables;         // null block (0) for dropped out-of-window blocks

  void clear() {
    slot_mapping.clear();
    block_table_offsets.clear();
    block_tables.clear();
  }
};

struct StepBatch {
  int64_t step_index = 0;
  int32_t block_size = kDefaultBlockSize;
  std::vector<TokenWrite> writes;
  std::vector<int64_t> slot_mapping;
  std::vector<SequenceRead> reads;
  std::vector<int32_t> block_table_offsets;  // size reads.size() + 1 (or empty when no reads)
  std::vector<BlockId> block_tables;
  std::vector<BlockCopy> copies;
  std::vector<BlockSwap> swap_out;
  std::vector<BlockSwap> swap_in;
  std::vector<GroupStepTables> groups;  // hybrid layouts only (see above)

  // Empties every list but keeps capacity (the replay loop reuses one StepBatch).
  void clear() {
    writes.clear();
    slot_mapping.clear();
    reads.clear();
    block_table_offsets.clear();
    block_tables.clear();
    copies.clear();
    swap_out.clear();
    swap_in.clear();
    for (GroupStepTables& g : groups) g.clear();
  }
};

}  // namespace kvsim
