// The CUDA kernels' CTA bodies (kv_kernel_bodies.h, block_allocator_bodies.h) run over an emulated
// grid (emulated_grid.h: every blockIdx and threadIdx, the launch shapes of device_kernels.cu)
// against the scalar reference of kv_test_util.h and the host twin. This covers what the twin's
// flat loops never execute: the per-CTA thread loops, layer groups, copy chunking, gather's
// entry->sequence search and block sum, the allocator's saturating block scan, atomics, and
// offsets above 2^31 and 2^32 bytes.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "emulated_grid.h"
#include "kv_test_util.h"
#include "kvsim/core/block_pool.h"
#include "kvsim/cuda/block_allocator.h"
#include "kvsim/cuda/detail/block_allocator_bodies.h"
#include "kvsim/cuda/detail/kv_kernel_bodies.h"
#include "kvsim/cuda/host_kernels.h"
#include "kvsim/cuda/host_pool.h"

namespace kvsim {
namespace {

using test::EmulatedCta;
using test::run_grid;

struct GridShape {
  KvLayoutKind kind;
  KvDtype dtype;
  int32_t num_kv_heads;
  int32_t head_dim;
  int32_t block_size;
  int32_t num_layers;
};

std::string shape_name(const ::testing::TestParamInfo<GridShape>& info) {
  const GridShape& s = info.param;
  return std::string(kv_layout_name(s.kind)) + "_" + kv_dtype_name(s.dtype) + "_H" +
         std::to_string(s.num_kv_heads) + "_D" + std::to_string(s.head_dim) + "_bs" +
         std::to_string(s.block_size) + "_L" + std::to_string(s.num_layers);
}

class EmulatedGrid : public ::testing::TestWithParam<GridShape> {
 protected:
  KvCacheLayout layout(int64_t num_blocks = 11) const {
    const GridShape& s = GetParam();
    KvCacheLayout l;
    l.num_blocks = num_blocks;
    l.block_size = s.block_size;
    l.num_layers = s.num_layers;
    l.num_kv_heads = s.num_kv_heads;
    l.head_dim = s.head_dim;
    l.dtype = s.dtype;
    l.layout = s.kind;
    l.validate();
    return l;
  }
};

std::vector<unsigned char> bytes_of(const HostPool& p) {
  return {p.data(), p.data() + p.bytes()};
}

// Tokens into distinct random slots, every 5th one padding.
void random_tokens(const KvCacheLayout& l, int n, std::mt19937& rng, std::vector<int64_t>& slots,
                   std::vector<int64_t>& req, std::vector<int32_t>& pos) {
  std::vector<int64_t> all(static_cast<size_t>(l.num_slots()));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  for (int t = 0; t < n; ++t) {
    const bool pad = t % 5 == 2;
    slots.push_back(pad ? kPadSlotId : all[static_cast<size_t>(t)]);
    req.push_back(pad ? -1 : static_cast<int64_t>(rng() % 40));
    pos.push_back(static_cast<int32_t>(rng() % 3000));
  }
}

// write_kv of staging layers for pool layers [layer_begin, layer_begin + num_layers): the grid
// (token, layer group) with layer groups cut short at the end, threads looping over vectors when
// a token has more than kWriteKvThreads of them.
TEST_P(EmulatedGrid, WriteKvMatchesScalarReferenceAndTwin) {
  const KvCacheLayout l = layout();
  std::mt19937 rng(11);
  std::vector<int64_t> slots, req;
  std::vector<int32_t> pos;
  random_tokens(l, 37, rng, slots, req, pos);
  const auto T = static_cast<int64_t>(slots.size());
  for (int32_t layer_begin = 0; layer_begin < l.num_layers; layer_begin += 2) {
    const int32_t n = l.num_layers - layer_begin;
    const int64_t stage = T * l.num_kv_heads * l.head_row_bytes() * n;
    AlignedHostBuffer key(stage), value(stage);
    twin::gen_kv(l, layer_begin, n, req.data(), pos.data(), T, key.data(), value.data());

    HostPool emulated(l), twin_pool(l);
    const ops::WriteKvOp op{l, emulated.data(), key.data(), value.data(), slots.data(),
                            T, layer_begin,     n};
    const cta::LaunchShape shape = cta::write_kv_shape(op);
    ASSERT_LE(shape.threads, cta::kWriteKvThreads);
    ASSERT_EQ(shape.threads % 32, 0);
    run_grid(shape, [&](EmulatedCta& c, const cta::CtaIndex& at) { cta::write_kv_cta(c, at, op); });
    twin::write_kv(l, twin_pool.data(), layer_begin, n, key.data(), value.data(), slots.data(), T);

    std::vector<unsigned char> want(static_cast<size_t>(l.pool_bytes()), kPoisonByte);
    const int eb = l.elem_bytes();
    for (int64_t t = 0; t < T; ++t) {
      const int64_t slot = slots[static_cast<size_t>(t)];
      if (slot < 0) continue;
      for (int32_t layer = layer_begin; layer < l.num_layers; ++layer)
        for (int32_t h = 0; h < l.num_kv_heads; ++h)
          for (int32_t d = 0; d < l.head_dim; ++d)
            for (int32_t kv = 0; kv < 2; ++kv)
              test::write_bits(
                  want,
                  test::ref_offset(l, layer, slot / l.block_size, slot % l.block_size, h, d, kv),
                  eb,
                  test::ref_value(l, req[static_cast<size_t>(t)], pos[static_cast<size_t>(t)],
                                  layer, h, d, kv));
    }
    ASSERT_TRUE(bytes_of(emulated) == want) << "layer_begin " << layer_begin;
    ASSERT_TRUE(bytes_of(twin_pool) == want) << "layer_begin " << layer_begin;
  }
}

// Byte offset and length of block b's page (layer, part) from vLLM's shapes
// (flash_attn.py FlashAttentionBackend.get_kv_cache_shape).
std::pair<int64_t, int64_t> ref_page(const KvCacheLayout& l, int32_t layer, int32_t part,
                                     int64_t block) {
  const int64_t len = int64_t{l.block_size} * l.num_kv_heads * l.head_dim * l.elem_bytes() *
                      (l.layout == KvLayoutKind::kNhdPacked ? 2 : 1);
  return {test::ref_offset(l, layer, block, 0, 0, 0, part), len};
}

// copy_blocks with one resident wave's worth of CTAs on 1 SM (one unrolled sweep per CTA) and on
// 132 SMs (pages split into more chunks); pages need not be a multiple of the CTA size.
TEST_P(EmulatedGrid, CopyBlocksChunksMatchScalarReference) {
  const KvCacheLayout l = layout(23);
  for (const int32_t num_sms : {1, 132}) {
    for (const int num_pairs : {1, 7}) {
      HostPool pool(l);
      std::mt19937 rng(static_cast<uint32_t>(num_sms * 10 + num_pairs));
      for (int64_t i = 0; i < pool.bytes(); ++i) pool.data()[i] = static_cast<unsigned char>(rng());
      std::vector<BlockId> ids(static_cast<size_t>(l.num_blocks));
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      std::vector<BlockCopy> pairs;
      for (int p = 0; p < num_pairs; ++p) {  // sources and destinations disjoint
        pairs.push_back({ids[static_cast<size_t>(p)], ids[static_cast<size_t>(num_pairs + p)]});
      }
      std::vector<unsigned char> want = bytes_of(pool);
      for (const BlockCopy& c : pairs)
        for (int32_t layer = 0; layer < l.num_layers; ++layer)
          for (int32_t part = 0; part < l.num_parts(); ++part) {
            const auto [src, len] = ref_page(l, layer, part, c.src);
            const int64_t dst = ref_page(l, layer, part, c.dst).first;
            std::memcpy(want.data() + dst, want.data() + src, static_cast<size_t>(len));
          }
      const ops::CopyBlocksOp op{l, pool.data(), pairs.data(), num_pairs};
      const int64_t resident = int64_t{num_sms} * cta::kCopyBlocksMinCtasPerSm;
      const cta::LaunchShape shape = cta::copy_blocks_shape(op, resident);
      const int64_t cv = cta::copy_chunk_vecs(op.vecs_per_page(), shape.grid.z);
      ASSERT_GE(cv * shape.grid.z, op.vecs_per_page());
      ASSERT_LT(cv * (shape.grid.z - 1), op.vecs_per_page()) << "an empty chunk was launched";
      // One unrolled sweep per CTA once a resident wave is full; more chunks (at least one
      // vector per thread) otherwise.
      const int64_t sweep_chunks = cta::ceil_div(
          op.vecs_per_page(), int64_t{cta::kCopyBlocksThreads} * cta::kCopyBlocksUnroll);
      const int64_t ctas = num_pairs * int64_t{op.pages_per_pair()};
      if (ctas * sweep_chunks >= resident) {
        ASSERT_EQ(shape.grid.z, sweep_chunks);
      } else {
        ASSERT_GE(shape.grid.z, sweep_chunks);
        ASSERT_GE(cv, cta::kCopyBlocksThreads);
      }
      run_grid(shape,
               [&](EmulatedCta& c, const cta::CtaIndex& at) { cta::copy_blocks_cta(c, at, op); });
      ASSERT_TRUE(bytes_of(pool) == want) << num_sms << " SMs, " << num_pairs << " pairs";
    }
  }
}

// A pool holding generated tokens in every slot of blocks [1, n).
HostPool filled_pool(const KvCacheLayout& l, std::mt19937& rng) {
  HostPool pool(l);
  std::vector<int64_t> slots, req;
  std::vector<int32_t> pos;
  for (int64_t s = l.block_size; s < l.num_slots(); ++s) {
    slots.push_back(s);
    req.push_back(static_cast<int64_t>(rng() % 9));
    pos.push_back(static_cast<int32_t>(rng() % 500));
  }
  const auto T = static_cast<int64_t>(slots.size());
  const int64_t stage = T * l.num_kv_heads * l.head_row_bytes() * l.num_layers;
  AlignedHostBuffer key(stage), value(stage);
  twin::gen_kv(l, 0, l.num_layers, req.data(), pos.data(), T, key.data(), value.data());
  twin::write_kv(l, pool.data(), 0, l.num_layers, key.data(), value.data(), slots.data(), T);
  return pool;
}

// gather_kv: one CTA per (table entry, page); sequences with empty tables, table entries past
// seq_len and partial last blocks exercise the entry->sequence search and the valid-prefix count.
TEST_P(EmulatedGrid, GatherKvChecksumsMatchScalarReference) {
  const KvCacheLayout l = layout(13);
  std::mt19937 rng(5);
  const HostPool pool = filled_pool(l, rng);
  const std::vector<unsigned char> bytes = bytes_of(pool);
  std::vector<int32_t> seq_lens, offsets{0};
  std::vector<BlockId> tables;
  std::vector<std::vector<BlockId>> per_seq;
  for (int s = 0; s < 9; ++s) {
    const auto entries = static_cast<int32_t>(s % 4 == 1 ? 0 : 1 + rng() % 5);
    std::vector<BlockId> t;
    for (int32_t e = 0; e < entries; ++e) t.push_back(static_cast<BlockId>(1 + rng() % 12));
    // Sometimes fewer tokens than the table holds (entries past seq_len read nothing).
    const int32_t cap = entries * l.block_size;
    seq_lens.push_back(cap == 0 ? 0 : static_cast<int32_t>(rng() % static_cast<uint32_t>(cap + 1)));
    tables.insert(tables.end(), t.begin(), t.end());
    offsets.push_back(static_cast<int32_t>(tables.size()));
    per_seq.push_back(t);
  }
  const auto num_seqs = static_cast<int32_t>(seq_lens.size());
  const ops::GatherKvOp op{l,       pool.data(), seq_lens.data(), offsets.data(), tables.data(),
                           num_seqs};
  std::vector<unsigned long long> sums(seq_lens.size(), 0);
  cta::GatherKvShared sh{};
  run_grid(cta::gather_kv_shape(op, op.num_entries()),
           [&](EmulatedCta& c, const cta::CtaIndex& at) {
             cta::gather_kv_cta(c, at, op, sums.data(), sh);
           });
  std::vector<uint64_t> twin_sums(seq_lens.size());
  twin::gather_kv(l, pool.data(), seq_lens.data(), offsets.data(), tables.data(), num_seqs,
                  twin_sums.data());
  for (size_t s = 0; s < seq_lens.size(); ++s) {
    const uint64_t want = test::ref_checksum(l, bytes, per_seq[s], seq_lens[s]);
    EXPECT_EQ(sums[s], want) << "sequence " << s;
    EXPECT_EQ(twin_sums[s], want) << "sequence " << s;
  }
}

// gen_kv and verify: grid-stride loops, here with so few CTAs that every thread strides; verify's
// count and first bad item combine through the atomics.
TEST_P(EmulatedGrid, GridStrideGenAndVerifyMatchTwin) {
  const KvCacheLayout l = layout(5);
  std::mt19937 rng(3);
  std::vector<int64_t> slots, req;
  std::vector<int32_t> pos;
  random_tokens(l, 19, rng, slots, req, pos);
  const auto T = static_cast<int64_t>(slots.size());
  const int64_t stage = T * l.num_kv_heads * l.head_row_bytes() * l.num_layers;
  AlignedHostBuffer key(stage), value(stage), key_twin(stage), value_twin(stage);
  const ops::GenKvOp gen{l, key.data(), value.data(), req.data(), pos.data(), T, 0, l.num_layers};
  run_grid(cta::grid_stride_shape(gen.num_items(), cta::kGenKvThreads, /*max_ctas=*/3),
           [&](EmulatedCta& c, const cta::CtaIndex& at) {
             cta::gen_kv_cta(c, at, gen, gen.num_items());
           });
  twin::gen_kv(l, 0, l.num_layers, req.data(), pos.data(), T, key_twin.data(), value_twin.data());
  ASSERT_EQ(0, std::memcmp(key.data(), key_twin.data(), static_cast<size_t>(stage)));
  ASSERT_EQ(0, std::memcmp(value.data(), value_twin.data(), static_cast<size_t>(stage)));

  HostPool pool(l);
  twin::write_kv(l, pool.data(), 0, l.num_layers, key.data(), value.data(), slots.data(), T);
  std::vector<int64_t> slot_req(static_cast<size_t>(l.num_slots()), -1);
  std::vector<int32_t> slot_pos(static_cast<size_t>(l.num_slots()), 0);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t s = slots[static_cast<size_t>(t)];
    if (s < 0) continue;
    slot_req[static_cast<size_t>(s)] = req[static_cast<size_t>(t)];
    slot_pos[static_cast<size_t>(s)] = pos[static_cast<size_t>(t)];
  }
  for (const int corrupt : {0, 3}) {
    for (int i = 0; i < corrupt; ++i)
      pool.data()[rng() % static_cast<uint64_t>(pool.bytes())] ^= 0x10;
    const ops::VerifyVecOp op{l, pool.data(), slot_req.data(), slot_pos.data()};
    long long result[2] = {0, LLONG_MAX};
    run_grid(cta::grid_stride_shape(op.num_items(), cta::kVerifyThreads, /*max_ctas=*/4),
             [&](EmulatedCta& c, const cta::CtaIndex& at) {
               cta::verify_cta(c, at, op, op.num_items(), result);
             });
    int64_t first = -1;
    const int64_t bad =
        twin::verify_slots(l, pool.data(), slot_req.data(), slot_pos.data(), &first);
    EXPECT_EQ(result[0], bad);
    EXPECT_EQ(result[1], bad == 0 ? LLONG_MAX : first);
    if (corrupt > 0) {
      EXPECT_GT(bad, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, EmulatedGrid,
    ::testing::Values(
        // Llama-like head (bf16, D = 128): 64 vectors per token and head pair.
        GridShape{KvLayoutKind::kNhdPacked, KvDtype::kBf16, 2, 128, 16, 6},
        GridShape{KvLayoutKind::kLegacySplit, KvDtype::kBf16, 2, 128, 16, 5},
        // More vectors per token (1024) than kWriteKvThreads: the thread loop runs 4 times.
        GridShape{KvLayoutKind::kNhdPacked, KvDtype::kBf16, 32, 128, 4, 3},
        // Tiny tokens: 4 vectors, one partial warp; odd block size; fp8 and fp32.
        GridShape{KvLayoutKind::kNhdPacked, KvDtype::kFp8E4m3, 1, 32, 5, 4},
        GridShape{KvLayoutKind::kLegacySplit, KvDtype::kFp32, 3, 16, 7, 9},
        GridShape{KvLayoutKind::kNhdPacked, KvDtype::kFp16, 4, 64, 32, 1}),
    shape_name);

// --- the allocator's CTA bodies ----------------------------------------------------------------

// GpuBlockAllocator's state and kernels, executed on one emulated CTA.
class EmulatedAllocator {
 public:
  explicit EmulatedAllocator(int32_t num_blocks)
      : num_blocks_(num_blocks),
        stack_(static_cast<size_t>(num_blocks - 1)),
        count_(num_blocks - 1) {
    for (int32_t i = 0; i < num_blocks - 1; ++i)
      stack_[static_cast<size_t>(i)] = num_blocks - 1 - i;
  }
  AllocStatus allocate(const std::vector<int32_t>& demands, std::vector<int32_t>& offsets,
                       std::vector<BlockId>& ids) {
    offsets.assign(demands.size() + 1, -1);
    ids.assign(static_cast<size_t>(num_blocks_), -1);
    int32_t status = -1;
    const cta::AllocateArgs args{
        stack_.data(),  &count_,    demands.data(), static_cast<int32_t>(demands.size()),
        offsets.data(), ids.data(), &status};
    EmulatedCta c{cta::kAllocateThreads};
    cta::AllocateShared sh{};
    cta::allocate_cta(c, args, sh);
    if (status == static_cast<int32_t>(AllocStatus::kOk))
      ids.resize(static_cast<size_t>(offsets.back()));
    return static_cast<AllocStatus>(status);
  }
  AllocStatus free(const std::vector<BlockId>& blocks) {
    int32_t status = -1;
    const cta::FreeArgs args{
        stack_.data(), &count_, num_blocks_, blocks.data(), static_cast<int64_t>(blocks.size()),
        &status};
    EmulatedCta c{cta::kFreeThreads};
    cta::FreeShared sh{};
    cta::free_cta(c, args, sh);
    return static_cast<AllocStatus>(status);
  }
  int64_t num_free() const { return count_; }
  std::vector<BlockId> free_ids_top_first() const {
    return {
        stack_.rbegin() + static_cast<std::ptrdiff_t>(stack_.size() - static_cast<size_t>(count_)),
        stack_.rend()};
  }

 private:
  int32_t num_blocks_;
  std::vector<BlockId> stack_;
  int64_t count_;
};

// Random rounds with batches over several 1024-request tiles (the scan's carry), against the host
// twin: same ids, offsets and free order.
TEST(EmulatedAllocatorGrid, MatchesHostTwinOverManyTiles) {
  const int32_t num_blocks = 20000;
  EmulatedAllocator emu(num_blocks);
  HostBlockAllocator twin(num_blocks);
  std::mt19937_64 rng(17);
  std::vector<std::vector<BlockId>> live;
  for (int round = 0; round < 40; ++round) {
    std::vector<int32_t> demands(1 + rng() % 2600);
    for (auto& d : demands) d = static_cast<int32_t>(rng() % 7);
    std::vector<int32_t> off_e, off_t;
    std::vector<BlockId> ids_e, ids_t;
    const AllocStatus st = emu.allocate(demands, off_e, ids_e);
    const bool ok = twin.allocate(demands, off_t, ids_t);
    ASSERT_EQ(st, ok ? AllocStatus::kOk : AllocStatus::kOutOfBlocks) << "round " << round;
    if (ok) {
      ASSERT_EQ(off_e, off_t) << "round " << round;
      ASSERT_EQ(ids_e, ids_t) << "round " << round;
      live.push_back(ids_e);
    }
    if (!live.empty() && rng() % 3 == 0) {
      std::vector<BlockId> freed;
      for (size_t k = 0; k < live.size() && freed.size() < 3000; ++k) {
        freed.insert(freed.end(), live[k].rbegin(), live[k].rend());
      }
      live.clear();
      ASSERT_EQ(emu.free(freed), AllocStatus::kOk);
      twin.free(freed);
    }
    ASSERT_EQ(emu.num_free(), twin.num_free());
    ASSERT_EQ(emu.free_ids_top_first(), twin.free_ids_top_first()) << "round " << round;
  }
}

// The 32-bit scan saturates instead of wrapping: 1024 demands of 2^22 sum to exactly 2^32, which
// a wrapping uint32 scan would see as 0 (an allocation of nothing that "succeeds").
TEST(EmulatedAllocatorGrid, SaturatingScanRefusesHugeTotals) {
  EmulatedAllocator emu(100);
  std::vector<int32_t> offsets;
  std::vector<BlockId> ids;
  for (const std::vector<int32_t>& demands :
       {std::vector<int32_t>(1024, 1 << 22), std::vector<int32_t>{INT32_MAX, INT32_MAX, 1},
        std::vector<int32_t>{99, 1}, [] {
          std::vector<int32_t> d(3000, 0);
          d[2500] = INT32_MAX;  // saturates in the third tile
          return d;
        }()}) {
    EXPECT_EQ(emu.allocate(demands, offsets, ids), AllocStatus::kOutOfBlocks);
    EXPECT_EQ(emu.num_free(), 99);
  }
  EXPECT_EQ(emu.allocate({98, 1}, offsets, ids), AllocStatus::kOk);
  EXPECT_EQ(offsets, (std::vector<int32_t>{0, 98, 99}));
  EXPECT_EQ(emu.num_free(), 0);
}

TEST(EmulatedAllocatorGrid, RejectsBadInputWithoutChanges) {
  EmulatedAllocator emu(50);
  std::vector<int32_t> offsets;
  std::vector<BlockId> ids;
  std::vector<int32_t> demands(2000, 0);
  demands[1500] = -1;  // second tile
  EXPECT_EQ(emu.allocate(demands, offsets, ids), AllocStatus::kBadInput);
  EXPECT_EQ(emu.num_free(), 49);
  EXPECT_EQ(emu.free({5}), AllocStatus::kBadInput);  // overflows the full stack
  ASSERT_EQ(emu.allocate({3}, offsets, ids), AllocStatus::kOk);
  EXPECT_EQ(emu.free({0}), AllocStatus::kBadInput);
  EXPECT_EQ(emu.free({50}), AllocStatus::kBadInput);
  EXPECT_EQ(emu.num_free(), 46);
  EXPECT_EQ(emu.free({ids[2], ids[1], ids[0]}), AllocStatus::kOk);
  EXPECT_EQ(emu.free_ids_top_first().front(), ids[2]);
}

// --- offsets above 2^31 and 2^32 bytes, without allocating them ----------------------------------

// A 5.2 GB pool reserved but never backed (MAP_NORESERVE): only the pages the kernels touch cost
// memory. write_kv (layer_begin = 1), copy_blocks and gather_kv run on blocks whose pages start
// above 2^31 (layer 0) and above 2^32 (layer 1), checked element by element against the scalar
// reference's offsets.
class SparsePool {
 public:
  explicit SparsePool(int64_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<unsigned char*>(p);
  }
  ~SparsePool() {
    if (data_ != nullptr) munmap(data_, static_cast<size_t>(bytes_));
  }
  SparsePool(const SparsePool&) = delete;
  SparsePool& operator=(const SparsePool&) = delete;
  unsigned char* data() const { return data_; }

 private:
  int64_t bytes_;
  unsigned char* data_ = nullptr;
};

TEST(EmulatedGridLargeOffsets, WriteCopyGatherAbove4GiB) {
  KvCacheLayout l;  // Llama-3.1-8B's KV head shape, 64 KiB pages
  l.num_blocks = 40000;
  l.block_size = 16;
  l.num_layers = 2;
  l.num_kv_heads = 8;
  l.head_dim = 128;
  l.validate();
  ASSERT_GT(l.pool_bytes(), int64_t{1} << 32);
  SparsePool pool(l.pool_bytes());
  ASSERT_NE(pool.data(), nullptr) << "mmap of " << l.pool_bytes()
                                  << " bytes (MAP_NORESERVE) failed";
  const std::vector<BlockId> blocks{32769, 39990, 39998, 39999};  // page offsets > 2^31
  const BlockId copy_dst = 39997;
  ASSERT_GT(test::ref_offset(l, 0, blocks[0], 0, 0, 0, 0), int64_t{1} << 31);
  ASSERT_GT(test::ref_offset(l, 1, blocks[1], 0, 0, 0, 0), int64_t{1} << 32);
  for (int32_t layer = 0; layer < l.num_layers; ++layer) {
    for (const BlockId b : {blocks[0], blocks[1], blocks[2], blocks[3], copy_dst}) {
      std::memset(pool.data() + l.page_offset(layer, 0, b), kPoisonByte,
                  static_cast<size_t>(l.page_bytes()));
    }
  }
  // Tokens: every slot of blocks[0..3], layer by layer through two write_kv launches (layer 0,
  // then layer_begin = 1).
  std::vector<int64_t> slots, req;
  std::vector<int32_t> pos;
  for (const BlockId b : blocks)
    for (int32_t o = 0; o < l.block_size; ++o) {
      slots.push_back(int64_t{b} * l.block_size + o);
      req.push_back(b % 7);
      pos.push_back(o + 3 * b);
    }
  slots[5] = kPadSlotId;  // stays poison
  const auto T = static_cast<int64_t>(slots.size());
  const int64_t stage = T * l.num_kv_heads * l.head_row_bytes();
  for (int32_t layer = 0; layer < l.num_layers; ++layer) {
    AlignedHostBuffer key(stage), value(stage);
    twin::gen_kv(l, layer, 1, req.data(), pos.data(), T, key.data(), value.data());
    const ops::WriteKvOp op{l, pool.data(), key.data(), value.data(), slots.data(), T, layer, 1};
    run_grid(cta::write_kv_shape(op),
             [&](EmulatedCta& c, const cta::CtaIndex& at) { cta::write_kv_cta(c, at, op); });
  }
  const int eb = l.elem_bytes();
  for (int64_t t = 0; t < T; ++t) {
    const int64_t slot =
        int64_t{blocks[static_cast<size_t>(t / l.block_size)]} * l.block_size + t % l.block_size;
    for (int32_t layer = 0; layer < l.num_layers; ++layer)
      for (int32_t h = 0; h < l.num_kv_heads; ++h)
        for (int32_t kv = 0; kv < 2; ++kv)
          for (int32_t d = 0; d < l.head_dim; ++d) {
            const int64_t off =
                test::ref_offset(l, layer, slot / l.block_size, slot % l.block_size, h, d, kv);
            const uint32_t want =
                slots[static_cast<size_t>(t)] < 0
                    ? poison_bits(eb)
                    : test::ref_value(l, req[static_cast<size_t>(t)], pos[static_cast<size_t>(t)],
                                      layer, h, d, kv);
            ASSERT_EQ(test::read_bits(pool.data(), off, eb), want)
                << "token " << t << " layer " << layer << " offset " << off;
          }
  }
  // copy_blocks: the highest block onto copy_dst, on a 132-SM grid (several chunks per page).
  const std::vector<BlockCopy> pairs{{blocks[3], copy_dst}};
  const ops::CopyBlocksOp copy{l, pool.data(), pairs.data(), 1};
  run_grid(cta::copy_blocks_shape(copy, int64_t{132} * cta::kCopyBlocksMinCtasPerSm),
           [&](EmulatedCta& c, const cta::CtaIndex& at) { cta::copy_blocks_cta(c, at, copy); });
  for (int32_t layer = 0; layer < l.num_layers; ++layer) {
    const auto [src, len] = ref_page(l, layer, 0, blocks[3]);
    const int64_t dst = ref_page(l, layer, 0, copy_dst).first;
    ASSERT_EQ(0, std::memcmp(pool.data() + src, pool.data() + dst, static_cast<size_t>(len)));
  }
  // gather_kv: two sequences over the high blocks, the second ending mid-block.
  const std::vector<std::vector<BlockId>> tables{{blocks[0], blocks[1]}, {blocks[2], copy_dst}};
  const std::vector<int32_t> seq_lens{32, 21};
  const std::vector<int32_t> offsets{0, 2, 4};
  std::vector<BlockId> flat;
  for (const auto& t : tables) flat.insert(flat.end(), t.begin(), t.end());
  const ops::GatherKvOp gather{l, pool.data(), seq_lens.data(), offsets.data(), flat.data(), 2};
  std::vector<unsigned long long> sums(2, 0);
  cta::GatherKvShared sh{};
  run_grid(cta::gather_kv_shape(gather, gather.num_entries()),
           [&](EmulatedCta& c, const cta::CtaIndex& at) {
             cta::gather_kv_cta(c, at, gather, sums.data(), sh);
           });
  for (size_t s = 0; s < tables.size(); ++s) {
    EXPECT_EQ(sums[s], test::ref_checksum(l, pool.data(), tables[s], seq_lens[s])) << s;
  }
}

}  // namespace
}  // namespace kvsim
