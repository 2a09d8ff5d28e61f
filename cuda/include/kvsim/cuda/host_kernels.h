// The host twin: the kv_ops.h kernels' semantics run on the CPU, one pass per contiguous row or
// page (host_kernels.cpp says why not one call per flat work item).
//
// Same contracts as the device launches in device_kernels.h, on host pointers; every pointer into
// a pool or staging buffer must be 16-byte aligned (HostPool and the backends' buffers are).
#pragma once

#include <cstdint>

#include "kvsim/core/step_batch.h"
#include "kvsim/cuda/kv_layout.h"

namespace kvsim::twin {

// key/value staging: [num_layers][num_tokens][H][D] elements of layout.dtype.
void write_kv(const KvCacheLayout& layout, unsigned char* pool, int32_t layer_begin,
              int32_t num_layers, const unsigned char* key, const unsigned char* value,
              const int64_t* slot_mapping, int64_t num_tokens);
void gen_kv(const KvCacheLayout& layout, int32_t layer_begin, int32_t num_layers,
            const int64_t* token_request, const int32_t* token_position, int64_t num_tokens,
            unsigned char* key, unsigned char* value);
void copy_blocks(const KvCacheLayout& layout, unsigned char* pool, const BlockCopy* pairs,
                 int64_t num_pairs);
// checksums[s] = sum of the 32-bit words of sequence s's first seq_lens[s] tokens.
void gather_kv(const KvCacheLayout& layout, const unsigned char* pool, const int32_t* seq_lens,
               const int32_t* table_offsets, const BlockId* block_tables, int32_t num_seqs,
               uint64_t* checksums);
// Elements that differ from the recorded writes (slot_request[s] < 0: must be poison);
// *first_bad_item = the lowest ops::VerifyVecOp item with a mismatch, or -1. Hybrid layouts pass
// the ledger's per-slot group and the groups' layer counts (ops::VerifyVecOp says what they mean).
int64_t verify_slots(const KvCacheLayout& layout, const unsigned char* pool,
                     const int64_t* slot_request, const int32_t* slot_position,
                     int64_t* first_bad_item, const int32_t* slot_group = nullptr,
                     const int32_t* group_num_layers = nullptr);

}  // namespace kvsim::twin
