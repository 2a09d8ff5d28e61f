// The two real KvBackend implementations (core/kv_backend.h):
//   * HostKvBackend: the host twin. The pool is host memory; every kernel is the kv_ops.h logic
//     run through Thrust's CPP system; times come from steady_clock.
//   * CudaKvBackend: the pool is device memory (one cudaMalloc arena, vLLM 0.26 layout); the
//     kernels are the CUDA ones; swaps go to a pinned host pool (cuMemcpyBatchAsync when the
//     driver has it, else one cudaMemcpyAsync per page); times come from CUDA events.
//
// execute(batch) order: swap_out, swap_in, copy_blocks, write_kv (staging generated from
// (request, position, layer, head, dim, k|v), then scattered through slot_mapping, per chunk of
// layers), gather_kv (one checksum per read sequence). device_seconds covers those phases only:
// generating the synthetic K/V input is the model's job in vLLM and is not timed. Bytes are read +
// written by each phase (staging reads included for write_kv). Both backends process the same
// batches identically, so their checksums and pools agree bit for bit.
//
// verify() compares every slot of the pool with the KvLedger: written slots must hold the values
// of their last (request, position); never-written slots must still be poison.
//
// Hybrid KV layouts (group_num_layers non-empty, vLLM's hybrid KV cache manager): the layout's
// layers are vLLM's KV cache tensors, one per position in a group, each shared by that layer of
// every group (a block belongs to one group at a time). Each group's writes go through its own
// slot mapping into its first n_g tensors, its reads through its own block tables (the null block,
// a window group's dropped block, is skipped); a read's checksum sums its groups.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kvsim/core/kv_backend.h"
#include "kvsim/cuda/host_pool.h"
#include "kvsim/cuda/kv_layout.h"
#include "kvsim/cuda/kv_ledger.h"

namespace kvsim {

class HostKvBackend final : public KvBackend {
 public:
  // max_pool_bytes: see HostPool (0 = the machine's available memory). group_num_layers: empty
  // for one full-attention group, else each KV cache group's layer count (see above).
  HostKvBackend(const KvCacheLayout& layout, int64_t host_swap_slots, int64_t max_pool_bytes = 0,
                std::vector<int32_t> group_num_layers = {});

  const char* name() const override { return "host"; }
  StepExecution execute(const StepBatch& batch) override;
  BackendVerification verify() override;

  const KvCacheLayout& layout() const { return pool_.layout(); }
  const HostPool& pool() const { return pool_; }
  // Checksums of the last batch's reads, in batch.reads order.
  std::span<const uint64_t> last_read_checksums() const { return checksums_; }

 private:
  HostPool pool_;
  AlignedHostBuffer swap_area_;
  KvLedger ledger_;
  AlignedHostBuffer key_;
  AlignedHostBuffer value_;
  std::vector<int64_t> token_request_;
  std::vector<int32_t> token_position_;
  std::vector<SwapCopy> swap_copies_;
  std::vector<int32_t> seq_lens_;  // per-step scratch for gather_kv, kept to reuse its capacity
  std::vector<uint64_t> checksums_;
  std::vector<uint64_t> group_checksums_;
};

class CudaKvBackend final : public KvBackend {
 public:
  // Throws std::runtime_error when built without CUDA, when no device is present, or when the
  // pool does not fit in free device memory (with requested and free bytes).
  CudaKvBackend(const KvCacheLayout& layout, int64_t host_swap_slots,
                std::vector<int32_t> group_num_layers = {});
  ~CudaKvBackend() override;

  const char* name() const override { return "cuda"; }
  StepExecution execute(const StepBatch& batch) override;
  BackendVerification verify() override;

  const KvCacheLayout& layout() const;
  std::span<const uint64_t> last_read_checksums() const;
  // True when swaps go through one cuMemcpyBatchAsync per phase.
  bool uses_batched_memcpy() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Number of CUDA devices (0 in builds without CUDA or when the runtime reports none/an error).
int cuda_device_count();

}  // namespace kvsim
