#include "kvsim/cuda/kv_ledger.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "kvsim/cuda/detail/kv_ops.h"

namespace kvsim {

void build_swap_copies(const KvCacheLayout& layout, std::span<const BlockSwap> swaps,
                       std::vector<SwapCopy>& out) {
  out.clear();
  const int32_t parts = layout.num_parts();
  for (const BlockSwap& s : swaps) {
    for (int32_t layer = 0; layer < layout.num_layers; ++layer) {
      for (int32_t part = 0; part < parts; ++part) {
        out.push_back({layout.page_offset(layer, part, s.device_block),
                       s.host_slot * layout.block_bytes_all_layers() +
                           (int64_t{layer} * parts + part) * layout.page_bytes(),
                       layout.page_bytes()});
      }
    }
  }
}

GroupTablesView group_tables(const StepBatch& b, size_t group) {
  if (b.groups.empty()) {
    if (group != 0) {
      throw std::invalid_argument(fmt::format(
          "step {}: KV cache group {} requested of a batch without groups", b.step_index, group));
    }
    return {b.slot_mapping, b.block_table_offsets, b.block_tables};
  }
  const GroupStepTables& g = b.groups.at(group);
  return {g.slot_mapping, g.block_table_offsets, g.block_tables};
}

StepExecution step_traffic(const KvCacheLayout& layout, const StepBatch& batch,
                           std::span<const int32_t> group_num_layers) {
  StepExecution t;
  const int64_t block_all = layout.block_bytes_all_layers();
  const auto moved =
      static_cast<int64_t>(batch.swap_out.size() + batch.swap_in.size() + batch.copies.size()) *
      block_all;
  t.bytes_read = moved;
  t.bytes_written = moved;
  const size_t num_groups = group_num_layers.empty() ? 1 : group_num_layers.size();
  for (size_t g = 0; g < num_groups; ++g) {
    if (!group_num_layers.empty() && batch.groups.size() != num_groups) break;  // validate() says
    const GroupTablesView v = group_tables(batch, g);
    const int32_t layers = group_num_layers.empty() ? layout.num_layers : group_num_layers[g];
    const int64_t token_all = layout.token_layer_bytes() * layers;
    const auto written_tokens = std::count_if(v.slot_mapping.begin(), v.slot_mapping.end(),
                                              [](int64_t s) { return s >= 0; });
    // Tokens read: each read's seq_len, less the tokens of null-block entries (a window group's
    // dropped blocks, which the gather skips).
    int64_t read_tokens = 0;
    for (size_t r = 0; r < batch.reads.size(); ++r) {
      read_tokens += batch.reads[r].seq_len;
      if (v.block_table_offsets.size() != batch.reads.size() + 1) continue;
      for (int64_t e = v.block_table_offsets[r]; e < v.block_table_offsets[r + 1]; ++e) {
        if (v.block_tables[static_cast<size_t>(e)] != kNullBlockId) continue;
        const int64_t first = (e - v.block_table_offsets[r]) * layout.block_size;
        read_tokens -= std::clamp<int64_t>(batch.reads[r].seq_len - first, 0, layout.block_size);
      }
    }
    t.bytes_read += written_tokens * token_all + read_tokens * token_all;
    t.bytes_written += written_tokens * token_all;
  }
  return t;
}

KvLedger::KvLedger(const KvCacheLayout& layout, int64_t host_swap_slots,
                   std::vector<int32_t> group_num_layers)
    : layout_(layout),
      host_swap_slots_(host_swap_slots),
      slot_request_(static_cast<size_t>(layout.num_slots()), -1),
      slot_position_(static_cast<size_t>(layout.num_slots()), 0),
      group_num_layers_(std::move(group_num_layers)),
      host_request_(static_cast<size_t>(host_swap_slots * layout.block_size), -1),
      host_position_(static_cast<size_t>(host_swap_slots * layout.block_size), 0) {
  if (host_swap_slots < 0) {
    throw std::invalid_argument(fmt::format("host_swap_slots = {} must be >= 0", host_swap_slots));
  }
  for (size_t g = 0; g < group_num_layers_.size(); ++g) {
    if (group_num_layers_[g] < 1 || group_num_layers_[g] > layout.num_layers) {
      throw std::invalid_argument(
          fmt::format("KV cache group {} has {} layers; a group needs 1 to {} (the pool's "
                      "tensors)",
                      g, group_num_layers_[g], layout.num_layers));
    }
  }
  if (grouped()) {
    slot_group_.assign(slot_request_.size(), 0);
    host_group_.assign(host_request_.size(), 0);
  }
}

namespace {
[[noreturn]] void out_of_range(const StepBatch& b, const char* field, size_t i, int64_t v,
                               int64_t lo, int64_t hi) {
  throw std::invalid_argument(fmt::format("step {}: {}[{}] = {} is out of range [{}, {})",
                                          b.step_index, field, i, v, lo, hi));
}
void check_range(const StepBatch& b, const char* field, size_t i, int64_t v, int64_t lo,
                 int64_t hi) {
  if (v < lo || v >= hi) out_of_range(b, field, i, v, lo, hi);
}
}  // namespace

void KvLedger::validate(const StepBatch& b) const {
  if (b.block_size != layout_.block_size) {
    throw std::invalid_argument(fmt::format("step {}: block_size = {} but the KV pool has {}",
                                            b.step_index, b.block_size, layout_.block_size));
  }
  int64_t tokens = 0;
  for (size_t i = 0; i < b.writes.size(); ++i) {
    const TokenWrite& w = b.writes[i];
    check_range(b, "writes.request_id", i, w.request_id, 0, INT64_MAX);
    check_range(b, "writes.first_position", i, w.first_position, 0, INT32_MAX);
    check_range(b, "writes.num_tokens", i, w.num_tokens, 0, INT32_MAX);
    tokens += w.num_tokens;
  }
  if (grouped()) {
    if (b.groups.size() != group_num_layers_.size()) {
      throw std::invalid_argument(
          fmt::format("step {}: the batch has tables for {} KV cache groups but the pool has {}",
                      b.step_index, b.groups.size(), group_num_layers_.size()));
    }
    for (size_t g = 1; g < b.groups.size(); ++g) {
      if (b.groups[g].slot_mapping.size() != b.groups[0].slot_mapping.size()) {
        throw std::invalid_argument(fmt::format(
            "step {}: groups[{}].slot_mapping has {} slots but groups[0].slot_mapping has {} "
            "(every group maps the same tokens)",
            b.step_index, g, b.groups[g].slot_mapping.size(), b.groups[0].slot_mapping.size()));
      }
    }
    if (!b.slot_mapping.empty() || !b.block_table_offsets.empty() || !b.block_tables.empty()) {
      throw std::invalid_argument(fmt::format(
          "step {}: a grouped batch must leave the top-level slot_mapping and block tables empty",
          b.step_index));
    }
  } else if (!b.groups.empty()) {
    throw std::invalid_argument(
        fmt::format("step {}: the batch has tables for {} KV cache groups but the pool has one "
                    "full-attention group",
                    b.step_index, b.groups.size()));
  }
  for (size_t g = 0; g < num_groups(); ++g) validate_tables(b, g, tokens);
  for (size_t i = 0; i < b.copies.size(); ++i) {
    check_range(b, "copies.src", i, b.copies[i].src, 0, layout_.num_blocks);
    check_range(b, "copies.dst", i, b.copies[i].dst, 0, layout_.num_blocks);
  }
  for (const auto* list : {&b.swap_out, &b.swap_in}) {
    const bool out = list == &b.swap_out;
    for (size_t i = 0; i < list->size(); ++i) {
      check_range(b, out ? "swap_out.device_block" : "swap_in.device_block", i,
                  (*list)[i].device_block, 0, layout_.num_blocks);
      check_range(b, out ? "swap_out.host_slot" : "swap_in.host_slot", i, (*list)[i].host_slot, 0,
                  host_swap_slots_);
    }
  }
}

void KvLedger::validate_tables(const StepBatch& b, size_t g, int64_t tokens) const {
  const GroupTablesView v = group_tables(b, g);
  // Field names carry the group for grouped batches: "groups[1].slot_mapping".
  const std::string prefix = grouped() ? fmt::format("groups[{}].", g) : std::string();
  const std::string slot_field = prefix + "slot_mapping";
  const std::string table_field = prefix + "block_tables";
  if (static_cast<int64_t>(v.slot_mapping.size()) < tokens) {
    throw std::invalid_argument(
        fmt::format("step {}: {} has {} slots but the writes have {} tokens", b.step_index,
                    slot_field, v.slot_mapping.size(), tokens));
  }
  for (size_t i = 0; i < v.slot_mapping.size(); ++i) {
    const int64_t s = v.slot_mapping[i];
    if (s == kPadSlotId) continue;
    if (static_cast<int64_t>(i) >= tokens) {
      throw std::invalid_argument(
          fmt::format("step {}: {}[{}] = {} is past the writes' {} tokens (only {} may pad)",
                      b.step_index, slot_field, i, s, tokens, kPadSlotId));
    }
    check_range(b, slot_field.c_str(), i, s, 0, layout_.num_slots());
  }
  if (b.reads.empty() && v.block_table_offsets.empty()) return;
  if (v.block_table_offsets.size() != b.reads.size() + 1) {
    throw std::invalid_argument(
        fmt::format("step {}: {}block_table_offsets has {} entries, expected reads + 1 = {}",
                    b.step_index, prefix, v.block_table_offsets.size(), b.reads.size() + 1));
  }
  if (v.block_table_offsets.front() != 0 ||
      v.block_table_offsets.back() != static_cast<int64_t>(v.block_tables.size())) {
    throw std::invalid_argument(
        fmt::format("step {}: {}block_table_offsets must run from 0 to {}.size() = {} (got {}..{})",
                    b.step_index, prefix, table_field, v.block_tables.size(),
                    v.block_table_offsets.front(), v.block_table_offsets.back()));
  }
  for (size_t i = 0; i < b.reads.size(); ++i) {
    const int64_t len = v.block_table_offsets[i + 1] - v.block_table_offsets[i];
    check_range(b, "reads.seq_len", i, b.reads[i].seq_len, 0, INT32_MAX);
    if (len < cdiv(b.reads[i].seq_len, layout_.block_size)) {
      throw std::invalid_argument(
          fmt::format("step {}: reads[{}] (request {}) has seq_len {} but its {} has {} blocks",
                      b.step_index, i, b.reads[i].request_id, b.reads[i].seq_len,
                      grouped() ? table_field : "block table", len));
    }
  }
  for (size_t i = 0; i < v.block_tables.size(); ++i) {
    check_range(b, table_field.c_str(), i, v.block_tables[i], 0, layout_.num_blocks);
  }
}

void KvLedger::expand_tokens(const StepBatch& b, std::vector<int64_t>& token_request,
                             std::vector<int32_t>& token_position) const {
  token_request.clear();
  token_position.clear();
  for (const TokenWrite& w : b.writes) {
    for (int32_t i = 0; i < w.num_tokens; ++i) {
      token_request.push_back(w.request_id);
      token_position.push_back(w.first_position + i);
    }
  }
  const size_t slots = group_tables(b, 0).slot_mapping.size();
  token_request.resize(slots, -1);
  token_position.resize(slots, 0);
}

void KvLedger::apply(const StepBatch& b) {
  const int64_t bs = layout_.block_size;
  const bool groups = grouped();
  // A block's slots (and, grouped, their groups) move with every swap and copy.
  auto move = [bs, groups](const std::vector<int64_t>& src_req, const std::vector<int32_t>& src_pos,
                           const std::vector<int32_t>& src_group, int64_t src_first,
                           std::vector<int64_t>& dst_req, std::vector<int32_t>& dst_pos,
                           std::vector<int32_t>& dst_group, int64_t dst_first) {
    for (int64_t o = 0; o < bs; ++o) {
      const auto d = static_cast<size_t>(dst_first + o);
      const auto s = static_cast<size_t>(src_first + o);
      dst_req[d] = src_req[s];
      dst_pos[d] = src_pos[s];
      if (groups) dst_group[d] = src_group[s];
    }
  };
  for (const BlockSwap& s : b.swap_out) {
    move(slot_request_, slot_position_, slot_group_, s.device_block * bs, host_request_,
         host_position_, host_group_, s.host_slot * bs);
  }
  for (const BlockSwap& s : b.swap_in) {
    move(host_request_, host_position_, host_group_, s.host_slot * bs, slot_request_,
         slot_position_, slot_group_, s.device_block * bs);
  }
  for (const BlockCopy& c : b.copies) {
    move(slot_request_, slot_position_, slot_group_, c.src * bs, slot_request_, slot_position_,
         slot_group_, c.dst * bs);
  }
  expand_tokens(b, scratch_request_, scratch_position_);
  for (size_t g = 0; g < num_groups(); ++g) {
    const std::span<const int64_t> slots = group_tables(b, g).slot_mapping;
    for (size_t i = 0; i < slots.size(); ++i) {
      const int64_t s = slots[i];
      if (s < 0) continue;
      slot_request_[static_cast<size_t>(s)] = scratch_request_[i];
      slot_position_[static_cast<size_t>(s)] = scratch_position_[i];
      if (groups) slot_group_[static_cast<size_t>(s)] = static_cast<int32_t>(g);
    }
  }
}

int64_t KvLedger::written_slots() const {
  return std::count_if(slot_request_.begin(), slot_request_.end(),
                       [](int64_t r) { return r >= 0; });
}

BackendVerification make_verification(const KvCacheLayout& layout, const KvLedger& ledger,
                                      int64_t bad, int64_t first_bad_item) {
  BackendVerification v;
  v.slots_checked = layout.num_slots();
  v.ok = bad == 0;
  if (v.ok) {
    v.detail = fmt::format("all {} slots ({} written, the rest still poison) match, {} layers",
                           v.slots_checked, ledger.written_slots(), layout.num_layers);
    return v;
  }
  const ops::VerifyVecOp op{layout, nullptr, nullptr, nullptr};
  const int64_t slot = op.slot_of(first_bad_item);
  const auto i = static_cast<size_t>(slot);
  const int64_t req = ledger.slot_request()[i];
  v.detail = fmt::format(
      "{} elements differ from the recorded writes; first at slot {} (block {}, offset {}), "
      "layer {}: expected {}",
      bad, slot, slot / layout.block_size, slot % layout.block_size, op.layer_of(first_bad_item),
      req >= 0 ? fmt::format("request {} position {}{}", req, ledger.slot_position()[i],
                             ledger.grouped()
                                 ? fmt::format(" (KV cache group {})", ledger.slot_group()[i])
                                 : std::string())
               : std::string("poison (never written)"));
  return v;
}

}  // namespace kvsim
