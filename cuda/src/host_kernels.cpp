// The host twin: the kv_ops.h kernels' semantics (placement, page offsets, element values, checksum
// and verification rules) run by CPU loops over whole rows and pages.
//
// The CUDA kernels map flat work items to (layer, token, vector) with divisions that are free
// next to a GPU's memory latency; on a CPU the same mapping per 16-byte vector (several 64-bit
// divisions each) held write_kv to 9 % and copy_blocks to 16 % of memcpy, and gen/verify hashed
// the token seed again for every element. The loops below walk the same index space in the same
// order (so verify's first bad item is still the lowest one) and move each contiguous row or
// page with one memcpy. The flat-item mapping itself is exercised on the CPU by the emulated-grid
// tests (tests/cuda/test_emulated_grid.cpp), which compare the CUDA bodies against this twin.
#include "kvsim/cuda/host_kernels.h"

#include <cstring>

#include "kvsim/cuda/detail/kv_ops.h"
#include "kvsim/cuda/kv_values.h"

namespace kvsim::twin {

namespace {

// Sum of the 32-bit words of [p, p + bytes), bytes a multiple of 4 (ops::word_sum over every
// 16-byte vector, written as a word loop the compiler vectorizes).
uint64_t word_sum_bytes(const unsigned char* p, int64_t bytes) {
  uint64_t sum = 0;
  for (int64_t b = 0; b < bytes; b += 4) {
    uint32_t w;
    std::memcpy(&w, p + b, 4);
    sum += w;
  }
  return sum;
}

// True when every byte of [p, p + bytes) is kPoisonByte; bytes a multiple of 8.
bool all_poison(const unsigned char* p, int64_t bytes) {
  constexpr uint64_t kPoison64 = 0x0101010101010101ULL * kPoisonByte;
  uint64_t diff = 0;
  for (int64_t b = 0; b < bytes; b += 8) {
    uint64_t w;
    std::memcpy(&w, p + b, 8);
    diff |= w ^ kPoison64;
  }
  return diff == 0;
}

}  // namespace

void write_kv(const KvCacheLayout& layout, unsigned char* pool, int32_t layer_begin,
              int32_t num_layers, const unsigned char* key, const unsigned char* value,
              const int64_t* slot_mapping, int64_t num_tokens) {
  const ops::WriteKvOp op{layout,       pool,       key,         value,
                          slot_mapping, num_tokens, layer_begin, num_layers};
  // One head row (D elements of K, or of V) is contiguous in the staging and in the pool.
  const int32_t vph = layout.vecs_per_head_row();
  const auto row = static_cast<size_t>(layout.head_row_bytes());
  for (int32_t li = 0; li < num_layers; ++li) {
    const int64_t src_layer = li * op.staging_layer_bytes();
    const int64_t dst_layer = (layer_begin + li) * layout.layer_bytes();
    for (int64_t t = 0; t < num_tokens; ++t) {
      const int64_t slot = slot_mapping[t];
      if (slot < 0) continue;  // padding
      for (int32_t j = 0; j < op.vecs_per_token(); j += vph) {
        const ops::WriteKvOp::VecPlace at = op.place(slot, t, j);
        std::memcpy(pool + at.dst + dst_layer, (at.kv == 0 ? key : value) + at.src + src_layer,
                    row);
      }
    }
  }
}

void gen_kv(const KvCacheLayout& layout, int32_t layer_begin, int32_t num_layers,
            const int64_t* token_request, const int32_t* token_position, int64_t num_tokens,
            unsigned char* key, unsigned char* value) {
  const ops::GenKvOp op{layout,         key,        value,       token_request,
                        token_position, num_tokens, layer_begin, num_layers};
  const int64_t ept = op.elems_per_token();
  const int32_t eb = layout.elem_bytes();
  for (int32_t li = 0; li < num_layers; ++li) {
    for (int64_t t = 0; t < num_tokens; ++t) {
      const int64_t first = (li * num_tokens + t) * ept;  // op's item of (li, t, head 0, dim 0)
      unsigned char* k = key + first * eb;
      unsigned char* v = value + first * eb;
      const int64_t req = token_request[t];
      if (req < 0) {  // padding: poison, as GenKvOp writes it
        std::memset(k, kPoisonByte, static_cast<size_t>(ept * eb));
        std::memset(v, kPoisonByte, static_cast<size_t>(ept * eb));
        continue;
      }
      const uint64_t seed = kv_token_seed(req, token_position[t], layer_begin + li);
      int64_t e = 0;
      for (int32_t head = 0; head < layout.num_kv_heads; ++head) {
        for (int32_t dim = 0; dim < layout.head_dim; ++dim, ++e) {
          store_elem(k + e * eb, eb, kv_value_bits(seed, head, dim, 0, eb));
          store_elem(v + e * eb, eb, kv_value_bits(seed, head, dim, 1, eb));
        }
      }
    }
  }
}

void copy_blocks(const KvCacheLayout& layout, unsigned char* pool, const BlockCopy* pairs,
                 int64_t num_pairs) {
  const ops::CopyBlocksOp op{layout, pool, pairs, num_pairs};
  const auto page_bytes = static_cast<size_t>(layout.page_bytes());
  // Pair-major like the op's items, so a pair whose source an earlier pair wrote reads the copy.
  for (int64_t p = 0; p < num_pairs; ++p) {
    const BlockCopy c = pairs[p];
    for (int32_t page = 0; page < op.pages_per_pair(); ++page) {
      const int32_t layer = page / layout.num_parts();
      const int32_t part = page % layout.num_parts();
      // memmove: a pair may name the same block twice.
      std::memmove(pool + layout.page_offset(layer, part, c.dst),
                   pool + layout.page_offset(layer, part, c.src), page_bytes);
    }
  }
}

void gather_kv(const KvCacheLayout& layout, const unsigned char* pool, const int32_t* seq_lens,
               const int32_t* table_offsets, const BlockId* block_tables, int32_t num_seqs,
               uint64_t* checksums) {
  const ops::GatherKvOp op{layout, pool, seq_lens, table_offsets, block_tables, num_seqs};
  for (int32_t s = 0; s < num_seqs; ++s) {
    uint64_t sum = 0;
    for (int64_t e = table_offsets[s]; e < table_offsets[s + 1]; ++e) {
      const int64_t bytes = op.entry_vecs_per_page(op.entry_tokens(e, s)) * 16;
      if (bytes == 0) continue;  // a table entry past seq_len
      for (int32_t layer = 0; layer < layout.num_layers; ++layer) {
        for (int32_t part = 0; part < layout.num_parts(); ++part) {
          sum += word_sum_bytes(pool + layout.page_offset(layer, part, block_tables[e]), bytes);
        }
      }
    }
    checksums[s] = sum;
  }
}

int64_t verify_slots(const KvCacheLayout& layout, const unsigned char* pool,
                     const int64_t* slot_request, const int32_t* slot_position,
                     int64_t* first_bad_item, const int32_t* slot_group,
                     const int32_t* group_num_layers) {
  const ops::VerifyVecOp op{layout,        pool,       slot_request,
                            slot_position, slot_group, group_num_layers};
  const int32_t eb = layout.elem_bytes();
  const int32_t vph = layout.vecs_per_head_row();
  const int32_t per_vec = 16 / eb;
  const uint32_t poison = poison_bits(eb);
  const int64_t row_bytes = layout.head_row_bytes();
  int64_t bad = 0;
  *first_bad_item = -1;
  // Layer, slot, head, K|V, vector: the op's item order.
  for (int32_t layer = 0; layer < layout.num_layers; ++layer) {
    for (int64_t slot = 0; slot < layout.num_slots(); ++slot) {
      const int64_t req = slot_request[slot];
      const int32_t seed_layer = req >= 0 ? op.seed_layer(layer, slot) : 0;
      if (seed_layer < 0) continue;  // a page its group never writes (hybrid layouts)
      const uint64_t seed = req >= 0 ? kv_token_seed(req, slot_position[slot], seed_layer) : 0;
      const int64_t slot_item = (layer * layout.num_slots() + slot) * op.items_per_slot();
      for (int32_t head = 0; head < layout.num_kv_heads; ++head) {
        for (int32_t kv = 0; kv < 2; ++kv) {
          const unsigned char* row = pool + layout.head_row_offset(layer, slot, head, kv);
          if (req < 0 && all_poison(row, row_bytes)) continue;  // never written, intact
          for (int32_t d = 0; d < layout.head_dim; ++d) {
            const uint32_t want = req >= 0 ? kv_value_bits(seed, head, d, kv, eb) : poison;
            if (load_elem(row + int64_t{d} * eb, eb) == want) continue;
            ++bad;
            if (*first_bad_item < 0) {
              *first_bad_item = slot_item + (head * 2 + kv) * vph + d / per_vec;
            }
          }
        }
      }
    }
  }
  return bad;
}

}  // namespace kvsim::twin
