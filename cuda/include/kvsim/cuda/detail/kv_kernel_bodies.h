// The CTA bodies of the KV kernels (device_kernels.cu launches them; tests/cuda runs them over an
// emulated grid). See cta.h for the executor contract. Per-element semantics stay in kv_ops.h;
// this file holds only the thread mapping: which CTA and thread touches which vectors, in what
// order, and how the per-CTA results are combined.
// Internal (detail/): included by the cuda room's kernels and the emulated-grid tests only.
#pragma once

#include <cstdint>

#include "kvsim/core/step_batch.h"
#include "kvsim/cuda/detail/cta.h"
#include "kvsim/cuda/detail/hd.h"
#include "kvsim/cuda/detail/kv_ops.h"

namespace kvsim::cta {

// --- write_kv: grid (token, layer group), threads over the token's 16-byte vectors ------------
//
// A CTA writes one token for up to kWriteKvLayersPerCta consecutive staging layers. Each thread
// reads the slot once (read-only path), computes its vector's source and destination once, then
// issues one 16-byte load per layer before the first store, so kWriteKvLayersPerCta loads are in
// flight per thread (reshape_and_cache_flash has one). Layers step by constant strides.
inline constexpr int32_t kWriteKvThreads = 256;
inline constexpr int32_t kWriteKvLayersPerCta = 4;

inline LaunchShape write_kv_shape(const ops::WriteKvOp& op) {
  LaunchShape s;
  s.grid.x = static_cast<uint32_t>(op.num_tokens);
  s.grid.y = static_cast<uint32_t>(ceil_div(op.num_layers, kWriteKvLayersPerCta));
  // Whole warps, at most the compiled bound; more vectors than threads loop.
  const int64_t warps = ceil_div(op.vecs_per_token(), 32);
  s.threads = static_cast<int32_t>(warps * 32 < kWriteKvThreads ? warps * 32 : kWriteKvThreads);
  return s;
}

KVSIM_HD inline void write_kv_thread(const ops::WriteKvOp& op, int64_t t, int32_t group, int32_t tx,
                                     int32_t threads) {
  const int64_t slot = ops::load_ro(op.slot_mapping + t);
  if (slot < 0) return;  // padding
  const int32_t l0 = group * kWriteKvLayersPerCta;
  const int32_t layers =
      op.num_layers - l0 < kWriteKvLayersPerCta ? op.num_layers - l0 : kWriteKvLayersPerCta;
  const int64_t src_stride = op.staging_layer_bytes();
  const int64_t dst_stride = op.layout.layer_bytes();
  const int32_t vpt = op.vecs_per_token();
  for (int32_t j = tx; j < vpt; j += threads) {
    const ops::WriteKvOp::VecPlace at = op.place(slot, t, j);
    const unsigned char* src = (at.kv == 0 ? op.key : op.value) + at.src + l0 * src_stride;
    unsigned char* dst = op.pool + at.dst + (op.layer_begin + l0) * dst_stride;
    ops::Vec16 r[kWriteKvLayersPerCta] = {};  // entries past the range are never stored
    for (int32_t k = 0; k < kWriteKvLayersPerCta; ++k) {
      if (k < layers) r[k] = ops::load16_ro(src + k * src_stride);
    }
    for (int32_t k = 0; k < kWriteKvLayersPerCta; ++k) {
      if (k < layers) ops::store16(dst + k * dst_stride, r[k]);
    }
  }
}

template <class Cta>
KVSIM_HD void write_kv_cta(Cta& cta, const CtaIndex& at, const ops::WriteKvOp& op) {
  cta.threads(
      [&](int32_t tx) { write_kv_thread(op, at.x, static_cast<int32_t>(at.y), tx, at.threads); });
}

// --- copy_blocks: grid (pair, page, chunk) ---------------------------------------------------
//
// Chunk z of a page is the contiguous vector range [z * cv, (z + 1) * cv) with
// cv = copy_chunk_vecs(vpp, grid_z) (a multiple of the CTA size, so any grid_z covers the page).
// Each thread reads its pair once (read-only path), computes both page bases once, then moves
// kCopyBlocksUnroll vectors per iteration: every load before the first store. The bound asks for
// kCopyBlocksMinCtasPerSm resident CTAs, i.e. full occupancy (<= 32 registers per thread).
inline constexpr int32_t kCopyBlocksThreads = 256;
inline constexpr int32_t kCopyBlocksMinCtasPerSm = kMaxThreadsPerSm / kCopyBlocksThreads;
inline constexpr int32_t kCopyBlocksUnroll = 4;

KVSIM_HD inline int64_t copy_chunk_vecs(int64_t vecs_per_page, uint32_t chunks) {
  return round_up(ceil_div(vecs_per_page, chunks), kCopyBlocksThreads);
}

// One full unrolled sweep per CTA; when that gives fewer CTAs than one resident wave
// (`resident_ctas` = SMs x resident CTAs per SM, from the occupancy API; e.g. a batch with fewer
// pairs than SMs), pages are split into more chunks, down to one vector per thread.
inline LaunchShape copy_blocks_shape(const ops::CopyBlocksOp& op, int64_t resident_ctas) {
  const int64_t vpp = op.vecs_per_page();
  const int64_t pages = op.num_pairs * op.pages_per_pair();
  const int64_t max_chunks = ceil_div(vpp, kCopyBlocksThreads);
  int64_t chunks = ceil_div(vpp, int64_t{kCopyBlocksThreads} * kCopyBlocksUnroll);
  if (pages * chunks < resident_ctas) chunks = ceil_div(resident_ctas, pages);
  if (chunks > max_chunks) chunks = max_chunks;
  if (chunks > 65535) chunks = 65535;
  // Drop chunks the rounding of copy_chunk_vecs would leave empty.
  chunks = ceil_div(vpp, copy_chunk_vecs(vpp, static_cast<uint32_t>(chunks)));
  LaunchShape s;
  s.grid = {static_cast<uint32_t>(op.num_pairs), static_cast<uint32_t>(op.pages_per_pair()),
            static_cast<uint32_t>(chunks)};
  s.threads = kCopyBlocksThreads;
  return s;
}

KVSIM_HD inline void copy_blocks_thread(const ops::CopyBlocksOp& op, int64_t p, int32_t page,
                                        uint32_t chunk, uint32_t chunks, int32_t tx) {
  const BlockId src_block = ops::load_ro(&op.pairs[p].src);
  const BlockId dst_block = ops::load_ro(&op.pairs[p].dst);
  const int32_t layer = page / op.layout.num_parts();
  const int32_t part = page % op.layout.num_parts();
  const unsigned char* src = op.pool + op.layout.page_offset(layer, part, src_block);
  unsigned char* dst = op.pool + op.layout.page_offset(layer, part, dst_block);
  const int64_t vpp = op.vecs_per_page();
  const int64_t cv = copy_chunk_vecs(vpp, chunks);
  const int64_t begin = chunk * cv;
  const int64_t end = begin + cv < vpp ? begin + cv : vpp;
  constexpr int64_t kStep = kCopyBlocksThreads;
  for (int64_t v = begin + tx; v < end; v += kStep * kCopyBlocksUnroll) {
    ops::Vec16 r[kCopyBlocksUnroll] = {};  // entries past the range are never stored
    for (int32_t k = 0; k < kCopyBlocksUnroll; ++k) {
      if (v + k * kStep < end) r[k] = ops::load16(src + (v + k * kStep) * 16);
    }
    for (int32_t k = 0; k < kCopyBlocksUnroll; ++k) {
      if (v + k * kStep < end) ops::store16(dst + (v + k * kStep) * 16, r[k]);
    }
  }
}

template <class Cta>
KVSIM_HD void copy_blocks_cta(Cta& cta, const CtaIndex& at, const ops::CopyBlocksOp& op) {
  cta.threads([&](int32_t tx) {
    copy_blocks_thread(op, at.x, static_cast<int32_t>(at.y), at.z, at.grid_z, tx);
  });
}

// --- gather_kv: grid (table entry, page) -----------------------------------------------------
//
// Thread 0 finds the entry's sequence (binary search over table_offsets) and its valid vectors;
// every thread sums its share of the page's valid prefix with kGatherKvUnroll loads in flight;
// the block sum goes into checksums[seq] with one atomic add (the sum is order-free, so the
// result is deterministic).
inline constexpr int32_t kGatherKvThreads = 256;
inline constexpr int32_t kGatherKvUnroll = 4;

inline LaunchShape gather_kv_shape(const ops::GatherKvOp& op, int64_t num_entries) {
  LaunchShape s;
  s.grid.x = static_cast<uint32_t>(num_entries);
  s.grid.y = static_cast<uint32_t>(op.layout.num_layers * op.layout.num_parts());
  s.threads = kGatherKvThreads;
  return s;
}

struct GatherKvShared {
  int32_t seq;
  int64_t vecs;  // valid vectors of the entry's page
};

// Full sweeps load kGatherKvUnroll vectors unconditionally before summing any (no predicates, so
// the loads stay in flight together); the remainder goes one vector at a time.
KVSIM_HD inline uint64_t gather_kv_thread_sum(const unsigned char* page, int64_t vecs, int32_t tx) {
  constexpr int64_t kStep = kGatherKvThreads;
  uint64_t sum = 0;
  int64_t v = tx;
  for (; v + (kGatherKvUnroll - 1) * kStep < vecs; v += kStep * kGatherKvUnroll) {
    ops::Vec16 r[kGatherKvUnroll];
    for (int32_t k = 0; k < kGatherKvUnroll; ++k)
      r[k] = ops::load16_ro(page + (v + k * kStep) * 16);
    for (int32_t k = 0; k < kGatherKvUnroll; ++k) sum += ops::word_sum(r[k]);
  }
  for (; v < vecs; v += kStep) sum += ops::word_sum(ops::load16_ro(page + v * 16));
  return sum;
}

template <class Cta>
KVSIM_HD void gather_kv_cta(Cta& cta, const CtaIndex& at, const ops::GatherKvOp& op,
                            unsigned long long* checksums, GatherKvShared& sh) {
  const int64_t e = at.x;
  cta.threads([&](int32_t tx) {
    if (tx == 0) {
      sh.seq = op.entry_seq(e);
      sh.vecs = op.entry_vecs_per_page(op.entry_tokens(e, sh.seq));
    }
  });
  cta.sync();
  if (sh.vecs == 0) return;  // uniform: a table entry past seq_len
  const int32_t page = static_cast<int32_t>(at.y);
  const BlockId block = ops::load_ro(op.block_tables + e);
  const unsigned char* base = op.pool + op.layout.page_offset(page / op.layout.num_parts(),
                                                              page % op.layout.num_parts(), block);
  const int64_t vecs = sh.vecs;
  const unsigned long long total =
      cta.sum([&](int32_t tx) { return gather_kv_thread_sum(base, vecs, tx); });
  cta.threads([&](int32_t tx) {
    if (tx == 0) cta.atomic_add(&checksums[sh.seq], total);
  });
}

// --- grid-stride kernels: gen_kv and verify ------------------------------------------------
inline constexpr int32_t kGenKvThreads = 256;
inline constexpr int32_t kVerifyThreads = 256;

template <class Cta>
KVSIM_HD void gen_kv_cta(Cta& cta, const CtaIndex& at, const ops::GenKvOp& op, int64_t n) {
  cta.threads([&](int32_t tx) {
    const int64_t stride = int64_t{at.grid_x} * at.threads;
    for (int64_t i = int64_t{at.x} * at.threads + tx; i < n; i += stride) op(i);
  });
}

// result[0] += mismatching elements, result[1] = min(result[1], first bad item).
template <class Cta>
KVSIM_HD void verify_cta(Cta& cta, const CtaIndex& at, const ops::VerifyVecOp& op, int64_t n,
                         long long* result) {
  cta.threads([&](int32_t tx) {
    const int64_t stride = int64_t{at.grid_x} * at.threads;
    for (int64_t i = int64_t{at.x} * at.threads + tx; i < n; i += stride) {
      const int64_t bad = op(i);
      if (bad > 0) {
        cta.atomic_add(reinterpret_cast<unsigned long long*>(&result[0]),
                       static_cast<unsigned long long>(bad));
        cta.atomic_min(&result[1], static_cast<long long>(i));
      }
    }
  });
}

}  // namespace kvsim::cta
