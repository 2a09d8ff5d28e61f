#include "replay_batch.h"

#include <stdexcept>
#include <string>

namespace kvsim::detail {

void build_step_batch(const SchedulerOutput& out, const KVCacheManager& kv, StepBatch& batch) {
  batch.clear();
  batch.step_index = out.step_index;
  const int32_t bs = kv.block_size();
  batch.block_size = bs;
  batch.block_table_offsets.push_back(0);
  batch.swap_out.assign(out.swap_out.begin(), out.swap_out.end());
  batch.swap_in.assign(out.swap_in.begin(), out.swap_in.end());
  for (const ScheduledRequest& s : out.scheduled) {
    const std::span<const BlockId> table = kv.get_block_ids(s.request_id);
    const int32_t seq_len = s.num_computed_tokens + s.num_tokens;
    const auto covered = static_cast<size_t>(cdiv(seq_len, bs));
    if (covered > table.size()) {
      throw std::logic_error("step batch: request " + std::to_string(s.request_id) + " needs " +
                             std::to_string(covered) + " blocks for " + std::to_string(seq_len) +
                             " tokens but holds " + std::to_string(table.size()));
    }
    batch.writes.push_back({s.request_id, s.num_computed_tokens, s.num_tokens});
    for (int32_t pos = s.num_computed_tokens; pos < seq_len; ++pos) {
      const BlockId b = table[static_cast<size_t>(pos / bs)];
      batch.slot_mapping.push_back(static_cast<int64_t>(b) * bs + pos % bs);
    }
    batch.reads.push_back({s.request_id, seq_len});
    batch.block_tables.insert(batch.block_tables.end(), table.begin(),
                              table.begin() + static_cast<std::ptrdiff_t>(covered));
    batch.block_table_offsets.push_back(static_cast<int32_t>(batch.block_tables.size()));
  }
}

}  // namespace kvsim::detail
