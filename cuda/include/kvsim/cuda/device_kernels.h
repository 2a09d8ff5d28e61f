// Device launches of the kv_ops.h logic (hand-written CUDA kernels, 16-byte vector accesses).
//
// Every function is asynchronous on `stream` and takes device pointers; launch errors are checked
// (std::runtime_error with file:line and cudaGetErrorString). Available only in builds with CUDA
// (KVSIM_HAVE_CUDA); the declarations are CUDA-free so plain C++ tests can call them.
#pragma once

#include <cstdint>

#include "kvsim/core/step_batch.h"
#include "kvsim/cuda/kv_layout.h"

struct CUstream_st;

namespace kvsim::device {

// One CTA per (token, staging layer), threads over the token's 16-byte vectors
// (vLLM reshape_and_cache_flash: one CTA per token, vectorized copy).
void write_kv(const KvCacheLayout& layout, unsigned char* pool, int32_t layer_begin,
              int32_t num_layers, const unsigned char* key, const unsigned char* value,
              const int64_t* slot_mapping, int64_t num_tokens, CUstream_st* stream);
void gen_kv(const KvCacheLayout& layout, int32_t layer_begin, int32_t num_layers,
            const int64_t* token_request, const int32_t* token_position, int64_t num_tokens,
            unsigned char* key, unsigned char* value, CUstream_st* stream);
// One CTA per (pair, page); grid-strided vectors.
void copy_blocks(const KvCacheLayout& layout, unsigned char* pool, const BlockCopy* pairs,
                 int64_t num_pairs, CUstream_st* stream);
// One CTA per (table entry, page): reads the page's valid prefix, block-reduces, atomically adds
// into checksums[seq] (zeroed first). num_entries = table_offsets[num_seqs] (host value).
void gather_kv(const KvCacheLayout& layout, const unsigned char* pool, const int32_t* seq_lens,
               const int32_t* table_offsets, const BlockId* block_tables, int32_t num_seqs,
               int64_t num_entries, uint64_t* checksums, CUstream_st* stream);
// d_result[0] = mismatching elements, d_result[1] = lowest bad ops::VerifyVecOp item (or
// INT64_MAX); both are initialised here.
void verify_slots(const KvCacheLayout& layout, const unsigned char* pool,
                  const int64_t* slot_request, const int32_t* slot_position, int64_t* d_result,
                  CUstream_st* stream, const int32_t* slot_group = nullptr,
                  const int32_t* group_num_layers = nullptr);

}  // namespace kvsim::device
