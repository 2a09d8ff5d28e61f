// The host twin (host_kernels.cpp: kv_ops.h's semantics in CPU loops) against the scalar reference
// of kv_test_util.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kv_test_util.h"
#include "kvsim/cuda/host_kernels.h"
#include "kvsim/cuda/host_pool.h"

namespace kvsim {
namespace {

struct Shape {
  KvLayoutKind kind;
  KvDtype dtype;
};

class HostKernels : public ::testing::TestWithParam<Shape> {
 protected:
  KvCacheLayout layout() const {
    KvCacheLayout l;
    l.num_blocks = 13;
    l.block_size = 16;
    l.num_layers = 3;
    l.num_kv_heads = 2;
    l.head_dim = GetParam().dtype == KvDtype::kFp8E4m3 ? 32 : 16;
    l.dtype = GetParam().dtype;
    l.layout = GetParam().kind;
    return l;
  }
};

// Scatter `n` tokens of random requests into random distinct slots (some padding).
void random_host_tokens(const KvCacheLayout& l, int n, std::mt19937& rng,
                        std::vector<int64_t>& slots, std::vector<int64_t>& req,
                        std::vector<int32_t>& pos) {
  std::vector<int64_t> all(static_cast<size_t>(l.num_slots()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  std::shuffle(all.begin(), all.end(), rng);
  for (int t = 0; t < n; ++t) {
    const bool pad = t % 7 == 3;
    slots.push_back(pad ? kPadSlotId : all[static_cast<size_t>(t)]);
    req.push_back(pad ? -1 : static_cast<int64_t>(rng() % 50));
    pos.push_back(static_cast<int32_t>(rng() % 4000));
  }
}

std::vector<unsigned char> to_vec(const HostPool& p) {
  return {p.data(), p.data() + p.bytes()};
}

TEST_P(HostKernels, GenAndWriteKvMatchScalarReference) {
  const KvCacheLayout l = layout();
  std::mt19937 rng(7);
  std::vector<int64_t> slots, req;
  std::vector<int32_t> pos;
  random_host_tokens(l, 60, rng, slots, req, pos);
  const auto T = static_cast<int64_t>(slots.size());

  HostPool pool(l);  // poisoned
  const int64_t stage = T * l.num_kv_heads * l.head_row_bytes() * l.num_layers;
  AlignedHostBuffer key(stage), value(stage);
  twin::gen_kv(l, 0, l.num_layers, req.data(), pos.data(), T, key.data(), value.data());
  // The staging holds [L][T][H][D] of the deterministic values.
  const int eb = l.elem_bytes();
  for (int32_t layer = 0; layer < l.num_layers; ++layer)
    for (int64_t t = 0; t < T; ++t)
      for (int32_t h = 0; h < l.num_kv_heads; ++h)
        for (int32_t d = 0; d < l.head_dim; ++d) {
          if (req[static_cast<size_t>(t)] < 0) continue;
          const int64_t e = ((layer * T + t) * l.num_kv_heads + h) * l.head_dim + d;
          uint32_t k = 0;
          std::memcpy(&k, key.data() + e * eb, static_cast<size_t>(eb));
          ASSERT_EQ(k, test::ref_value(l, req[static_cast<size_t>(t)], pos[static_cast<size_t>(t)],
                                       layer, h, d, 0));
        }
  // Two layer chunks, as the backends do.
  twin::write_kv(l, pool.data(), 0, 1, key.data(), value.data(), slots.data(), T);
  const int64_t layer_stage = T * l.num_kv_heads * l.head_row_bytes();
  twin::write_kv(l, pool.data(), 1, l.num_layers - 1, key.data() + layer_stage,
                 value.data() + layer_stage, slots.data(), T);

  std::vector<unsigned char> ref(static_cast<size_t>(l.pool_bytes()), kPoisonByte);
  test::ref_write(l, ref, slots, req, pos);
  // Byte for byte, including the poison left in every slot no token was written to.
  EXPECT_TRUE(to_vec(pool) == ref);
}

TEST_P(HostKernels, CopyBlocksAndGatherMatchScalarReference) {
  const KvCacheLayout l = layout();
  std::mt19937 rng(11);
  // Fill every slot with a distinct token.
  std::vector<int64_t> slots, req;
  std::vector<int32_t> pos;
  for (int64_t s = 0; s < l.num_slots(); ++s) {
    slots.push_back(s);
    req.push_back(s % 5);
    pos.push_back(static_cast<int32_t>(s));
  }
  std::vector<unsigned char> ref(static_cast<size_t>(l.pool_bytes()), kPoisonByte);
  test::ref_write(l, ref, slots, req, pos);
  HostPool pool(l);
  std::memcpy(pool.data(), ref.data(), ref.size());

  const std::vector<BlockCopy> pairs = {{3, 9}, {12, 1}, {0, 4}};
  twin::copy_blocks(l, pool.data(), pairs.data(), static_cast<int64_t>(pairs.size()));
  const int64_t block_elems_bytes = l.token_layer_bytes() / 2 / l.num_kv_heads;  // one head row
  for (const BlockCopy& c : pairs)
    for (int32_t layer = 0; layer < l.num_layers; ++layer)
      for (int32_t off = 0; off < l.block_size; ++off)
        for (int32_t h = 0; h < l.num_kv_heads; ++h)
          for (int32_t kv = 0; kv < 2; ++kv)
            std::memcpy(ref.data() + test::ref_offset(l, layer, c.dst, off, h, 0, kv),
                        ref.data() + test::ref_offset(l, layer, c.src, off, h, 0, kv),
                        static_cast<size_t>(block_elems_bytes));
  ASSERT_TRUE(to_vec(pool) == ref);

  // Three sequences: a partial last block, an empty one, a table longer than seq_len.
  const std::vector<std::vector<BlockId>> tables = {{4, 7, 2}, {}, {11, 5, 6}};
  const std::vector<int32_t> lens = {37, 0, 16};
  std::vector<int32_t> offsets = {0};
  std::vector<BlockId> flat;
  for (const auto& t : tables) {
    flat.insert(flat.end(), t.begin(), t.end());
    offsets.push_back(static_cast<int32_t>(flat.size()));
  }
  std::vector<uint64_t> sums(tables.size(), 1);
  twin::gather_kv(l, pool.data(), lens.data(), offsets.data(), flat.data(),
                  static_cast<int32_t>(lens.size()), sums.data());
  for (size_t s = 0; s < tables.size(); ++s) {
    EXPECT_EQ(sums[s], test::ref_checksum(l, ref, tables[s], lens[s])) << s;
  }
  EXPECT_EQ(sums[1], 0u);
  EXPECT_NE(sums[0], 0u);
}

TEST_P(HostKernels, VerifyFindsTheFirstCorruptedElement) {
  const KvCacheLayout l = layout();
  HostPool pool(l);
  std::vector<int64_t> slot_req(static_cast<size_t>(l.num_slots()), -1);
  std::vector<int32_t> slot_pos(static_cast<size_t>(l.num_slots()), 0);
  int64_t first = 0;
  EXPECT_EQ(twin::verify_slots(l, pool.data(), slot_req.data(), slot_pos.data(), &first), 0);
  EXPECT_EQ(first, -1);
  // Record a write that never happened: every element of that slot mismatches (no value equals
  // the poison pattern).
  slot_req[20] = 4;
  const int64_t elems = int64_t{l.num_layers} * l.num_kv_heads * 2 * l.head_dim;
  EXPECT_EQ(twin::verify_slots(l, pool.data(), slot_req.data(), slot_pos.data(), &first), elems);
  EXPECT_EQ(first / (int64_t{l.num_kv_heads} * 2 * l.vecs_per_head_row()), 20);
}

INSTANTIATE_TEST_SUITE_P(Layouts, HostKernels,
                         ::testing::Values(Shape{KvLayoutKind::kNhdPacked, KvDtype::kBf16},
                                           Shape{KvLayoutKind::kNhdPacked, KvDtype::kFp8E4m3},
                                           Shape{KvLayoutKind::kNhdPacked, KvDtype::kFp32},
                                           Shape{KvLayoutKind::kLegacySplit, KvDtype::kFp16},
                                           Shape{KvLayoutKind::kLegacySplit, KvDtype::kFp8E4m3}),
                         [](const auto& info) {
                           return std::string(kv_layout_name(info.param.kind)) + "_" +
                                  kv_dtype_name(info.param.dtype);
                         });

}  // namespace
}  // namespace kvsim
