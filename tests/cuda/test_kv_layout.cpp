#include <gtest/gtest.h>

#include <stdexcept>

#include "kv_test_util.h"
#include "kvsim/cuda/kv_layout.h"

namespace kvsim {
namespace {

KvCacheLayout small(KvLayoutKind kind, KvDtype dtype) {
  KvCacheLayout l;
  l.num_blocks = 7;
  l.block_size = 4;
  l.num_layers = 3;
  l.num_kv_heads = 2;
  l.head_dim = dtype == KvDtype::kFp8E4m3 ? 16 : 8;
  l.dtype = dtype;
  l.layout = kind;
  return l;
}

TEST(KvLayout, Llama8BPageAndPoolSizes) {
  KvCacheLayout l;
  l.num_blocks = 30720;
  l.block_size = 16;
  l.num_layers = 32;
  l.num_kv_heads = 8;
  l.head_dim = 128;
  // kappa = 2 * 32 * 8 * 128 * 2 = 131072 bytes per token; 16 tokens per block per layer = 64 KiB.
  EXPECT_EQ(l.token_layer_bytes() * l.num_layers, 131072);
  EXPECT_EQ(l.page_bytes(), 65536);
  EXPECT_EQ(l.block_bytes_all_layers(), 32 * 65536);
  EXPECT_EQ(l.pool_bytes(), int64_t{30720} * 16 * 131072);
  l.layout = KvLayoutKind::kLegacySplit;
  EXPECT_EQ(l.page_bytes(), 32768);  // K and V pages separately
  EXPECT_EQ(l.pool_bytes(), int64_t{30720} * 16 * 131072);
}

TEST(KvLayout, HeadRowOffsetsMatchTheSpecShapes) {
  for (KvLayoutKind kind : {KvLayoutKind::kNhdPacked, KvLayoutKind::kLegacySplit}) {
    for (KvDtype dt : {KvDtype::kBf16, KvDtype::kFp8E4m3, KvDtype::kFp32}) {
      const KvCacheLayout l = small(kind, dt);
      for (int32_t layer = 0; layer < l.num_layers; ++layer)
        for (int64_t slot = 0; slot < l.num_slots(); ++slot)
          for (int32_t h = 0; h < l.num_kv_heads; ++h)
            for (int32_t kv = 0; kv < 2; ++kv)
              ASSERT_EQ(
                  l.head_row_offset(layer, slot, h, kv),
                  test::ref_offset(l, layer, slot / l.block_size, slot % l.block_size, h, 0, kv))
                  << kv_layout_name(kind) << " " << kv_dtype_name(dt);
      // Pages: the valid-token prefix of a block is contiguous per part.
      EXPECT_EQ(l.page_offset(1, l.num_parts() - 1, 5),
                test::ref_offset(l, 1, 5, 0, 0, 0, l.num_parts() - 1));
    }
  }
}

TEST(KvLayout, ValidateNamesTheBadField) {
  KvCacheLayout l = small(KvLayoutKind::kNhdPacked, KvDtype::kBf16);
  l.num_kv_heads = 0;
  EXPECT_THROW(
      {
        try {
          l.validate();
        } catch (const std::invalid_argument& e) {
          EXPECT_STREQ(e.what(), "KV layout: num_kv_heads = 0 must be > 0");
          throw;
        }
      },
      std::invalid_argument);
  l = small(KvLayoutKind::kNhdPacked, KvDtype::kFp8E4m3);
  l.head_dim = 8;  // 8 bytes: not a 16-byte vector
  EXPECT_THROW(l.validate(), std::invalid_argument);
}

TEST(KvLayout, ParsesVllmDtypeNames) {
  EXPECT_EQ(parse_kv_dtype("bfloat16"), KvDtype::kBf16);
  EXPECT_EQ(parse_kv_dtype("fp8_e4m3"), KvDtype::kFp8E4m3);
  EXPECT_EQ(parse_kv_dtype("float16"), KvDtype::kFp16);
  EXPECT_EQ(parse_kv_dtype("float32"), KvDtype::kFp32);
  EXPECT_THROW(parse_kv_dtype("int4"), std::invalid_argument);
  EXPECT_EQ(parse_kv_layout("legacy"), KvLayoutKind::kLegacySplit);
  EXPECT_THROW(parse_kv_layout("hnd"), std::invalid_argument);
}

TEST(KvValues, NeverPoisonAndSensitiveToEveryField) {
  for (int eb : {1, 2, 4}) {
    const uint64_t seed = kv_token_seed(3, 17, 2);
    int same = 0;
    for (int d = 0; d < 4096; ++d) {
      const uint32_t v = kv_value_bits(seed, 1, d, 0, eb);
      ASSERT_NE(v, poison_bits(eb));
      same += v == kv_value_bits(seed, 1, d, 1, eb) ? 1 : 0;
    }
    EXPECT_LT(same, 4096 / 64) << eb;  // K and V differ (up to chance collisions at 8 bits)
  }
  EXPECT_NE(kv_token_seed(1, 2, 3), kv_token_seed(2, 1, 3));
  EXPECT_NE(kv_token_seed(1, 2, 3), kv_token_seed(1, 2, 4));
}

}  // namespace
}  // namespace kvsim
