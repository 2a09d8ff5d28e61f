#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "kvsim/cuda/host_kernels.h"
#include "kvsim/cuda/kv_backends.h"

namespace kvsim {

namespace {
// Staging for write_kv is generated for as many layers as fit in this many bytes (>= 1 layer).
constexpr int64_t kHostStagingBytes = int64_t{64} << 20;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

HostKvBackend::HostKvBackend(const KvCacheLayout& layout, int64_t host_swap_slots,
                             int64_t max_pool_bytes, std::vector<int32_t> group_num_layers)
    : pool_(layout, max_pool_bytes),
      swap_area_(host_swap_slots * layout.block_bytes_all_layers()),
      ledger_(layout, host_swap_slots, std::move(group_num_layers)) {}

StepExecution HostKvBackend::execute(const StepBatch& batch) {
  ledger_.validate(batch);
  const KvCacheLayout& layout = pool_.layout();
  StepExecution result = step_traffic(layout, batch, ledger_.group_num_layers());
  double seconds = 0.0;
  unsigned char* pool = pool_.data();

  auto t0 = std::chrono::steady_clock::now();
  build_swap_copies(layout, batch.swap_out, swap_copies_);
  for (const SwapCopy& c : swap_copies_) {
    std::memcpy(swap_area_.data() + c.host_offset, pool + c.pool_offset,
                static_cast<size_t>(c.bytes));
  }
  build_swap_copies(layout, batch.swap_in, swap_copies_);
  for (const SwapCopy& c : swap_copies_) {
    std::memcpy(pool + c.pool_offset, swap_area_.data() + c.host_offset,
                static_cast<size_t>(c.bytes));
  }
  twin::copy_blocks(layout, pool, batch.copies.data(), static_cast<int64_t>(batch.copies.size()));
  seconds += seconds_since(t0);

  const auto num_tokens = static_cast<int64_t>(group_tables(batch, 0).slot_mapping.size());
  if (num_tokens > 0) {
    ledger_.expand_tokens(batch, token_request_, token_position_);
    const int64_t layer_stage = num_tokens * layout.num_kv_heads * layout.head_row_bytes();
    const auto chunk = static_cast<int32_t>(
        std::clamp<int64_t>(kHostStagingBytes / layer_stage, 1, layout.num_layers));
    if (key_.size() < chunk * layer_stage) {
      key_ = AlignedHostBuffer(chunk * layer_stage);
      value_ = AlignedHostBuffer(chunk * layer_stage);
    }
    for (size_t g = 0; g < ledger_.num_groups(); ++g) {
      const int64_t* slots = group_tables(batch, g).slot_mapping.data();
      const int32_t layers = ledger_.layers_of_group(g);
      // Group g's tensor j holds seed layer g * num_layers + j (kv_ledger.h).
      const auto seed_base = static_cast<int32_t>(g) * layout.num_layers;
      for (int32_t l0 = 0; l0 < layers; l0 += chunk) {
        const int32_t n = std::min(chunk, layers - l0);
        twin::gen_kv(layout, seed_base + l0, n, token_request_.data(), token_position_.data(),
                     num_tokens, key_.data(), value_.data());
        t0 = std::chrono::steady_clock::now();
        twin::write_kv(layout, pool, l0, n, key_.data(), value_.data(), slots, num_tokens);
        seconds += seconds_since(t0);
      }
    }
  }

  checksums_.assign(batch.reads.size(), 0);
  if (!batch.reads.empty()) {
    seq_lens_.resize(batch.reads.size());
    std::transform(batch.reads.begin(), batch.reads.end(), seq_lens_.begin(),
                   [](const SequenceRead& r) { return r.seq_len; });
    group_checksums_.resize(batch.reads.size());
    for (size_t g = 0; g < ledger_.num_groups(); ++g) {
      const GroupTablesView v = group_tables(batch, g);
      // The group's first n_g tensors (layer offsets do not depend on num_layers).
      KvCacheLayout group_layout = layout;
      group_layout.num_layers = ledger_.layers_of_group(g);
      t0 = std::chrono::steady_clock::now();
      twin::gather_kv(group_layout, pool, seq_lens_.data(), v.block_table_offsets.data(),
                      v.block_tables.data(), static_cast<int32_t>(seq_lens_.size()),
                      group_checksums_.data());
      seconds += seconds_since(t0);
      for (size_t r = 0; r < checksums_.size(); ++r) checksums_[r] += group_checksums_[r];
    }
  }
  ledger_.apply(batch);
  result.device_seconds = seconds;
  return result;
}

BackendVerification HostKvBackend::verify() {
  int64_t first_bad = -1;
  const bool grouped = ledger_.grouped();
  const int64_t bad = twin::verify_slots(
      pool_.layout(), pool_.data(), ledger_.slot_request().data(), ledger_.slot_position().data(),
      &first_bad, grouped ? ledger_.slot_group().data() : nullptr,
      grouped ? ledger_.group_num_layers().data() : nullptr);
  return make_verification(pool_.layout(), ledger_, bad, first_bad);
}

}  // namespace kvsim
