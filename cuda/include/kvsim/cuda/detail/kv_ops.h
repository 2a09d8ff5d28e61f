// Per-element kernel logic shared by the CUDA kernels and the host twin.
//
// Each op is a trivially copyable functor holding raw pointers into one address space (device
// memory for the kernels, host memory for the twin). `operator()(i)` processes flat work item i
// (the grid-stride kernels and the emulated-grid tests use it); the CUDA kernels call the same
// pieces with their own thread mapping (one CTA per token, per (pair, layer), ...), and the host
// twin with loops over whole rows and pages (host_kernels.cpp). Nothing here allocates,
// synchronises or depends on the execution space.
//
// All pool and staging pointers must be 16-byte aligned (the arenas are; KvCacheLayout::validate()
// guarantees every row is a multiple of 16 bytes): data moves as 16-byte vectors, like vLLM's
// vectorize_with_alignment fast path.
// Internal (detail/): included by the cuda room's kernels, host twin and ledger only.
#pragma once

#include <cstdint>
#if !defined(__CUDA_ARCH__)
#include <cstring>
#endif

#include "kvsim/core/step_batch.h"
#include "kvsim/core/types.h"
#include "kvsim/cuda/detail/hd.h"
#include "kvsim/cuda/kv_layout.h"
#include "kvsim/cuda/kv_values.h"

namespace kvsim::ops {

struct alignas(16) Vec16 {
  uint32_t w[4];
};

KVSIM_HD inline Vec16 load16(const unsigned char* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const Vec16*>(p);
#else
  Vec16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}

KVSIM_HD inline void store16(unsigned char* p, const Vec16& v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<Vec16*>(p) = v;
#else
  std::memcpy(p, &v, sizeof v);
#endif
}

// Read-only loads: the non-coherent texture path (ld.global.nc, `__ldg`) on the GPU, for data no
// thread of the kernel writes (staging, slot mappings, copy pairs, a pool being gathered).
// `__restrict__` alone does not get there: the kernels store through `unsigned char*`, which may
// alias anything, so without __ldg the compiler reloads such values after every store.
KVSIM_HD inline Vec16 load16_ro(const unsigned char* p) {
#if defined(__CUDA_ARCH__)
  const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
  return Vec16{{u.x, u.y, u.z, u.w}};
#else
  return load16(p);
#endif
}

template <class T>
KVSIM_HD inline T load_ro(const T* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

// The checksum unit: the 32-bit words of a vector, added modulo 2^64 (order-free, so the parallel
// reduction on the GPU and the serial one on the CPU agree bit for bit).
KVSIM_HD inline uint64_t word_sum(const Vec16& v) {
  return uint64_t{v.w[0]} + uint64_t{v.w[1]} + uint64_t{v.w[2]} + uint64_t{v.w[3]};
}

// write_kv = vLLM reshape_and_cache_flash: key/value staging [num_layers][num_tokens][H][D]
// scattered into the pool through slot_mapping (slot = block * block_size + offset; < 0 = skip).
struct WriteKvOp {
  KvCacheLayout layout;
  unsigned char* pool;
  const unsigned char* key;
  const unsigned char* value;
  const int64_t* slot_mapping;
  int64_t num_tokens;
  int32_t layer_begin;  // staging layer li goes to pool layer layer_begin + li
  int32_t num_layers;

  KVSIM_HD int32_t vecs_per_token() const {
    return 2 * layout.num_kv_heads * layout.vecs_per_head_row();
  }
  KVSIM_HD int64_t num_items() const { return num_layers * num_tokens * vecs_per_token(); }
  // Bytes of one staging layer ([num_tokens][H][D] elements of key, or of value).
  KVSIM_HD int64_t staging_layer_bytes() const {
    return num_tokens * layout.num_kv_heads * layout.head_row_bytes();
  }
  // Where vector j of token t goes, split so that a kernel can compute it once and step layers
  // by a constant stride. Vector j: head-major, then K|V, then vector, so consecutive j write
  // consecutive bytes of the packed (v0.26) layout.
  struct VecPlace {
    int64_t src;  // offset in key (kv == 0) or value staging of staging layer 0
    int64_t dst;  // offset in the pool for pool layer 0
    int32_t kv;
  };
  KVSIM_HD VecPlace place(int64_t slot, int64_t t, int32_t j) const {
    const int32_t vph = layout.vecs_per_head_row();
    const int32_t head = j / (2 * vph);
    const int32_t kv = (j / vph) % 2;
    const int32_t v = j % vph;
    return {(t * layout.num_kv_heads + head) * layout.head_row_bytes() + v * 16,
            layout.head_row_offset(0, slot, head, kv) + v * 16, kv};
  }
  KVSIM_HD void apply(int32_t li, int64_t t, int32_t j) const {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) return;
    const VecPlace at = place(slot, t, j);
    const unsigned char* src = (at.kv == 0 ? key : value) + at.src + li * staging_layer_bytes();
    unsigned char* dst = pool + at.dst + (layer_begin + li) * layout.layer_bytes();
    store16(dst, load16(src));
  }
  KVSIM_HD void operator()(int64_t i) const {
    const int32_t vpt = vecs_per_token();
    const int64_t rest = i / vpt;
    apply(static_cast<int32_t>(rest / num_tokens), rest % num_tokens,
          static_cast<int32_t>(i % vpt));
  }
};

// Fills write_kv's staging with the deterministic values of (request, position, layer, head, dim,
// k|v). Tokens with request < 0 (padding) get poison, which write_kv skips anyway.
struct GenKvOp {
  KvCacheLayout layout;
  unsigned char* key;
  unsigned char* value;
  const int64_t* token_request;
  const int32_t* token_position;
  int64_t num_tokens;
  int32_t layer_begin;
  int32_t num_layers;

  KVSIM_HD int64_t elems_per_token() const {
    return int64_t{layout.num_kv_heads} * layout.head_dim;
  }
  KVSIM_HD int64_t num_items() const { return num_layers * num_tokens * elems_per_token(); }
  KVSIM_HD void operator()(int64_t i) const {
    const int64_t ept = elems_per_token();
    const int64_t e = i % ept;
    const int64_t rest = i / ept;
    const int64_t t = rest % num_tokens;
    const int32_t li = static_cast<int32_t>(rest / num_tokens);
    const int32_t head = static_cast<int32_t>(e / layout.head_dim);
    const int32_t dim = static_cast<int32_t>(e % layout.head_dim);
    const int32_t eb = layout.elem_bytes();
    const int64_t req = token_request[t];
    uint32_t k_bits = poison_bits(eb);
    uint32_t v_bits = k_bits;
    if (req >= 0) {
      const uint64_t seed = kv_token_seed(req, token_position[t], layer_begin + li);
      k_bits = kv_value_bits(seed, head, dim, 0, eb);
      v_bits = kv_value_bits(seed, head, dim, 1, eb);
    }
    store_elem(key + i * eb, eb, k_bits);
    store_elem(value + i * eb, eb, v_bits);
  }
};

// copy_blocks: for every (src, dst) pair, every layer and part, dst's page = src's page.
struct CopyBlocksOp {
  KvCacheLayout layout;
  unsigned char* pool;
  const BlockCopy* pairs;
  int64_t num_pairs;

  KVSIM_HD int64_t vecs_per_page() const { return layout.page_bytes() / 16; }
  KVSIM_HD int32_t pages_per_pair() const { return layout.num_layers * layout.num_parts(); }
  KVSIM_HD int64_t num_items() const { return num_pairs * pages_per_pair() * vecs_per_page(); }
  // Vector v of page `page` (= layer * num_parts + part) of pair p.
  KVSIM_HD void apply(int64_t p, int32_t page, int64_t v) const {
    const int32_t layer = page / layout.num_parts();
    const int32_t part = page % layout.num_parts();
    const BlockCopy c = pairs[p];
    const unsigned char* src = pool + layout.page_offset(layer, part, c.src) + v * 16;
    unsigned char* dst = pool + layout.page_offset(layer, part, c.dst) + v * 16;
    store16(dst, load16(src));
  }
  KVSIM_HD void operator()(int64_t i) const {
    const int64_t vpp = vecs_per_page();
    const int64_t rest = i / vpp;
    apply(rest / pages_per_pair(), static_cast<int32_t>(rest % pages_per_pair()), i % vpp);
  }
};

// gather_kv: every sequence reads its first seq_len tokens, every layer and part, through its
// block table (CSR: table_offsets[s] .. table_offsets[s + 1] index block_tables), reduced to a
// checksum per sequence (the sum of every 32-bit word read, mod 2^64).
struct GatherKvOp {
  KvCacheLayout layout;
  const unsigned char* pool;
  const int32_t* seq_lens;
  const int32_t* table_offsets;  // num_seqs + 1 entries
  const BlockId* block_tables;
  int32_t num_seqs;

  KVSIM_HD int64_t num_entries() const { return num_seqs == 0 ? 0 : table_offsets[num_seqs]; }
  // The sequence owning table entry e (largest s with table_offsets[s] <= e).
  KVSIM_HD int32_t entry_seq(int64_t e) const {
    int32_t lo = 0;
    int32_t hi = num_seqs - 1;
    while (lo < hi) {
      const int32_t mid = (lo + hi + 1) / 2;
      if (table_offsets[mid] <= e) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }
  // Tokens of entry e that the sequence attends over (0 for table entries past seq_len, and for
  // the null block: a window group's dropped block, never read).
  KVSIM_HD int32_t entry_tokens(int64_t e, int32_t s) const {
    if (block_tables[e] == kNullBlockId) return 0;
    const int64_t first = (e - table_offsets[s]) * layout.block_size;
    const int64_t n = seq_lens[s] - first;
    return n <= 0 ? 0 : (n >= layout.block_size ? layout.block_size : static_cast<int32_t>(n));
  }
  // The valid tokens of a page are its prefix: token_part_bytes per token.
  KVSIM_HD int64_t entry_vecs_per_page(int32_t tokens) const {
    return tokens * layout.token_part_bytes() / 16;
  }
  KVSIM_HD uint64_t vec_sum(BlockId block, int32_t page, int64_t v) const {
    const int32_t layer = page / layout.num_parts();
    const int32_t part = page % layout.num_parts();
    return word_sum(load16(pool + layout.page_offset(layer, part, block) + v * 16));
  }
  // Serial checksum of one sequence (the host twin's unit of parallelism).
  KVSIM_HD uint64_t sequence_checksum(int32_t s) const {
    uint64_t sum = 0;
    const int32_t pages = layout.num_layers * layout.num_parts();
    for (int64_t e = table_offsets[s]; e < table_offsets[s + 1]; ++e) {
      const int64_t nv = entry_vecs_per_page(entry_tokens(e, s));
      for (int32_t page = 0; page < pages; ++page) {
        for (int64_t v = 0; v < nv; ++v) sum += vec_sum(block_tables[e], page, v);
      }
    }
    return sum;
  }
  KVSIM_HD uint64_t operator()(int32_t s) const { return sequence_checksum(s); }
};

// Verification against the ledger, one 16-byte vector per work item. Items run layer-major, then
// slot, head, K|V, vector, so consecutive items read consecutive bytes of the packed layout.
// operator()(i) = elements of vector i whose bits differ from what its slot's last write produced
// (slot_request[slot] < 0: never written, so the bytes must still be poison).
// Hybrid layouts (slot_group set): the pool's layers are vLLM's shared tensors, layer j holding
// layer j of whichever KV cache group owns the block; a slot written by group g holds the values
// of seed layer g * num_layers + j in its first group_num_layers[g] layers, and the rest (a group
// with fewer layers than the pool has tensors never writes them) is not checked.
struct VerifyVecOp {
  KvCacheLayout layout;
  const unsigned char* pool;
  const int64_t* slot_request;
  const int32_t* slot_position;
  const int32_t* slot_group = nullptr;        // per slot, the group of its last write
  const int32_t* group_num_layers = nullptr;  // per group

  // The value seed layer of (layer, slot) for a written slot, or -1 when it is not checked.
  KVSIM_HD int32_t seed_layer(int32_t layer, int64_t slot) const {
    if (slot_group == nullptr) return layer;
    const int32_t g = slot_group[slot];
    return layer < group_num_layers[g] ? g * layout.num_layers + layer : -1;
  }

  KVSIM_HD int64_t items_per_slot() const {
    return int64_t{layout.num_kv_heads} * 2 * layout.vecs_per_head_row();
  }
  KVSIM_HD int64_t num_items() const {
    return layout.num_layers * layout.num_slots() * items_per_slot();
  }
  KVSIM_HD int64_t slot_of(int64_t i) const { return (i / items_per_slot()) % layout.num_slots(); }
  KVSIM_HD int32_t layer_of(int64_t i) const {
    return static_cast<int32_t>(i / items_per_slot() / layout.num_slots());
  }
  KVSIM_HD int64_t operator()(int64_t i) const {
    const int32_t vph = layout.vecs_per_head_row();
    const int64_t in_slot = i % items_per_slot();
    const int32_t head = static_cast<int32_t>(in_slot / (2 * vph));
    const int32_t kv = static_cast<int32_t>((in_slot / vph) % 2);
    const int32_t v = static_cast<int32_t>(in_slot % vph);
    const int64_t slot = slot_of(i);
    const int32_t layer = layer_of(i);
    const int32_t eb = layout.elem_bytes();
    const Vec16 got = load16(pool + layout.head_row_offset(layer, slot, head, kv) + v * 16);
    const auto* bytes = reinterpret_cast<const unsigned char*>(got.w);
    const int64_t req = slot_request[slot];
    const int32_t seed_l = req >= 0 ? seed_layer(layer, slot) : 0;
    if (seed_l < 0) return 0;
    const uint64_t seed = req >= 0 ? kv_token_seed(req, slot_position[slot], seed_l) : 0;
    const int32_t per_vec = 16 / eb;
    int64_t bad = 0;
    for (int32_t e = 0; e < per_vec; ++e) {
      const uint32_t want =
          req >= 0 ? kv_value_bits(seed, head, v * per_vec + e, kv, eb) : poison_bits(eb);
      bad += load_elem(bytes + e * eb, eb) != want ? 1 : 0;
    }
    return bad;
  }
};

}  // namespace kvsim::ops
