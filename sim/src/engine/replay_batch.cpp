#include "replay_batch.h"

#include <stdexcept>
#include <string>

namespace kvsim::detail {

namespace {

// Appends request `s`'s slots and the table prefix covering its first seq_len tokens.
void append_tables(const ScheduledRequest& s, std::span<const BlockId> table, int32_t bs,
                   std::vector<int64_t>& slot_mapping, std::vector<BlockId>& block_tables,
                   std::vector<int32_t>& block_table_offsets) {
  const int32_t seq_len = s.num_computed_tokens + s.num_tokens;
  const auto covered = static_cast<size_t>(cdiv(seq_len, bs));
  if (covered > table.size()) {
    throw std::logic_error("step batch: request " + std::to_string(s.request_id) + " needs " +
                           std::to_string(covered) + " blocks for " + std::to_string(seq_len) +
                           " tokens but holds " + std::to_string(table.size()));
  }
  for (int32_t pos = s.num_computed_tokens; pos < seq_len; ++pos) {
    const BlockId b = table[static_cast<size_t>(pos / bs)];
    if (b == kNullBlockId) {
      // A token being written always lies in the window (vLLM drops only blocks before it).
      throw std::logic_error("step batch: request " + std::to_string(s.request_id) +
                             " writes position " + std::to_string(pos) + " into the null block");
    }
    slot_mapping.push_back(static_cast<int64_t>(b) * bs + pos % bs);
  }
  block_tables.insert(block_tables.end(), table.begin(),
                      table.begin() + static_cast<std::ptrdiff_t>(covered));
  block_table_offsets.push_back(static_cast<int32_t>(block_tables.size()));
}

}  // namespace

void build_step_batch(const SchedulerOutput& out, const KVCacheManager& kv, StepBatch& batch) {
  batch.clear();
  batch.step_index = out.step_index;
  const int32_t bs = kv.block_size();
  batch.block_size = bs;
  batch.swap_out.assign(out.swap_out.begin(), out.swap_out.end());
  batch.swap_in.assign(out.swap_in.begin(), out.swap_in.end());
  // The coordinated (hybrid or window) layouts fill one set of tables per KV cache group.
  const size_t num_groups = kv.coordinator() != nullptr ? kv.num_kv_cache_groups() : 0;
  batch.groups.resize(num_groups);
  if (num_groups == 0) batch.block_table_offsets.push_back(0);
  for (GroupStepTables& g : batch.groups) g.block_table_offsets.push_back(0);
  for (const ScheduledRequest& s : out.scheduled) {
    const int32_t seq_len = s.num_computed_tokens + s.num_tokens;
    batch.writes.push_back({s.request_id, s.num_computed_tokens, s.num_tokens});
    batch.reads.push_back({s.request_id, seq_len});
    if (num_groups == 0) {
      append_tables(s, kv.get_block_ids(s.request_id), bs, batch.slot_mapping, batch.block_tables,
                    batch.block_table_offsets);
      continue;
    }
    for (size_t g = 0; g < num_groups; ++g) {
      GroupStepTables& t = batch.groups[g];
      append_tables(s, kv.get_block_ids(s.request_id, g), bs, t.slot_mapping, t.block_tables,
                    t.block_table_offsets);
    }
  }
}

}  // namespace kvsim::detail
