#include "kvsim/cuda/kv_ledger.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "kvsim/cuda/kv_ops.h"

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

StepExecution step_traffic(const KvCacheLayout& layout, const StepBatch& batch) {
  StepExecution t;
  const int64_t block_all = layout.block_bytes_all_layers();
  const int64_t token_all = layout.token_layer_bytes() * layout.num_layers;
  const auto moved =
      static_cast<int64_t>(batch.swap_out.size() + batch.swap_in.size() + batch.copies.size()) *
      block_all;
  const auto written_tokens = std::count_if(batch.slot_mapping.begin(), batch.slot_mapping.end(),
                                            [](int64_t s) { return s >= 0; });
  int64_t read_tokens = 0;
  for (const SequenceRead& r : batch.reads) read_tokens += r.seq_len;
  t.bytes_read = moved + written_tokens * token_all + read_tokens * token_all;
  t.bytes_written = moved + written_tokens * token_all;
  return t;
}

KvLedger::KvLedger(const KvCacheLayout& layout, int64_t host_swap_slots)
    : layout_(layout),
      host_swap_slots_(host_swap_slots),
      slot_request_(static_cast<size_t>(layout.num_slots()), -1),
      slot_position_(static_cast<size_t>(layout.num_slots()), 0),
      host_request_(static_cast<size_t>(host_swap_slots * layout.block_size), -1),
      host_position_(static_cast<size_t>(host_swap_slots * layout.block_size), 0) {
  if (host_swap_slots < 0) {
    throw std::invalid_argument(fmt::format("host_swap_slots = {} must be >= 0", host_swap_slots));
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
  if (static_cast<int64_t>(b.slot_mapping.size()) < tokens) {
    throw std::invalid_argument(
        fmt::format("step {}: slot_mapping has {} slots but the writes have {} tokens",
                    b.step_index, b.slot_mapping.size(), tokens));
  }
  for (size_t i = 0; i < b.slot_mapping.size(); ++i) {
    const int64_t s = b.slot_mapping[i];
    if (s == kPadSlotId) continue;
    if (static_cast<int64_t>(i) >= tokens) {
      throw std::invalid_argument(fmt::format(
          "step {}: slot_mapping[{}] = {} is past the writes' {} tokens (only {} may pad)",
          b.step_index, i, s, tokens, kPadSlotId));
    }
    check_range(b, "slot_mapping", i, s, 0, layout_.num_slots());
  }
  if (!b.reads.empty() || !b.block_table_offsets.empty()) {
    if (b.block_table_offsets.size() != b.reads.size() + 1) {
      throw std::invalid_argument(
          fmt::format("step {}: block_table_offsets has {} entries, expected reads + 1 = {}",
                      b.step_index, b.block_table_offsets.size(), b.reads.size() + 1));
    }
    if (b.block_table_offsets.front() != 0 ||
        b.block_table_offsets.back() != static_cast<int64_t>(b.block_tables.size())) {
      throw std::invalid_argument(fmt::format(
          "step {}: block_table_offsets must run from 0 to block_tables.size() = {} (got {}..{})",
          b.step_index, b.block_tables.size(), b.block_table_offsets.front(),
          b.block_table_offsets.back()));
    }
    for (size_t i = 0; i < b.reads.size(); ++i) {
      const int64_t len = b.block_table_offsets[i + 1] - b.block_table_offsets[i];
      check_range(b, "reads.seq_len", i, b.reads[i].seq_len, 0, INT32_MAX);
      if (len < cdiv(b.reads[i].seq_len, layout_.block_size)) {
        throw std::invalid_argument(fmt::format(
            "step {}: reads[{}] (request {}) has seq_len {} but its block table has {} blocks",
            b.step_index, i, b.reads[i].request_id, b.reads[i].seq_len, len));
      }
    }
    for (size_t i = 0; i < b.block_tables.size(); ++i) {
      check_range(b, "block_tables", i, b.block_tables[i], 0, layout_.num_blocks);
    }
  }
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
  token_request.resize(b.slot_mapping.size(), -1);
  token_position.resize(b.slot_mapping.size(), 0);
}

void KvLedger::apply(const StepBatch& b) {
  const int64_t bs = layout_.block_size;
  auto move = [bs](const std::vector<int64_t>& src_req, const std::vector<int32_t>& src_pos,
                   int64_t src_first, std::vector<int64_t>& dst_req, std::vector<int32_t>& dst_pos,
                   int64_t dst_first) {
    for (int64_t o = 0; o < bs; ++o) {
      dst_req[static_cast<size_t>(dst_first + o)] = src_req[static_cast<size_t>(src_first + o)];
      dst_pos[static_cast<size_t>(dst_first + o)] = src_pos[static_cast<size_t>(src_first + o)];
    }
  };
  for (const BlockSwap& s : b.swap_out) {
    move(slot_request_, slot_position_, s.device_block * bs, host_request_, host_position_,
         s.host_slot * bs);
  }
  for (const BlockSwap& s : b.swap_in) {
    move(host_request_, host_position_, s.host_slot * bs, slot_request_, slot_position_,
         s.device_block * bs);
  }
  for (const BlockCopy& c : b.copies) {
    move(slot_request_, slot_position_, c.src * bs, slot_request_, slot_position_, c.dst * bs);
  }
  expand_tokens(b, scratch_request_, scratch_position_);
  for (size_t i = 0; i < b.slot_mapping.size(); ++i) {
    const int64_t s = b.slot_mapping[i];
    if (s < 0) continue;
    slot_request_[static_cast<size_t>(s)] = scratch_request_[i];
    slot_position_[static_cast<size_t>(s)] = scratch_position_[i];
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
      req >= 0 ? fmt::format("request {} position {}", req, ledger.slot_position()[i])
               : std::string("poison (never written)"));
  return v;
}

}  // namespace kvsim
