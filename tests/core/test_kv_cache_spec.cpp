#include "kvsim/core/kv_cache_spec.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace kvsim {
namespace {

TEST(KVCacheSpec, FullAttentionConfigIsOneGroupOfEveryLayer) {
  const KVCacheConfig c = make_full_attention_kv_cache_config(100, 16, 4, 2048);
  validate_kv_cache_config(c);
  ASSERT_EQ(c.kv_cache_groups.size(), 1u);
  EXPECT_FALSE(c.is_hybrid());
  EXPECT_EQ(c.block_size(), 16);
  EXPECT_EQ(c.kv_cache_groups[0].layer_indices, (std::vector<int32_t>{0, 1, 2, 3}));
  ASSERT_EQ(c.kv_cache_tensors.size(), 4u);
  EXPECT_EQ(c.kv_cache_tensors[3].size_bytes, 2048 * 100);
  EXPECT_EQ(c.kv_cache_tensors[3].shared_by, (std::vector<int32_t>{3}));
}

TEST(KVCacheSpec, ValidationNamesTheBrokenInvariant) {
  auto expect_fails = [](const KVCacheConfig& c, const char* tag) {
    try {
      validate_kv_cache_config(c);
      ADD_FAILURE() << "accepted a config breaking " << tag;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(tag), std::string::npos) << e.what();
    }
  };
  expect_fails(KVCacheConfig{}, "S1");
  KVCacheConfig c = make_full_attention_kv_cache_config(10, 16, 2, 512);
  KVCacheGroupSpec sw;
  sw.layer_indices = {2};
  sw.kv_cache_spec = {KVCacheSpecKind::kSlidingWindow, 16, 512, 128, 0};
  c.kv_cache_groups.push_back(sw);
  validate_kv_cache_config(c);
  EXPECT_TRUE(c.is_hybrid());

  KVCacheConfig bad = c;
  bad.kv_cache_groups[1].kv_cache_spec.sliding_window = 0;
  expect_fails(bad, "S2");
  bad = c;
  bad.kv_cache_groups[1].kv_cache_spec.page_size_bytes = 1024;
  expect_fails(bad, "S3");
  bad = c;
  bad.kv_cache_groups[1].layer_indices = {1};
  expect_fails(bad, "S4");
  bad = c;
  bad.num_blocks = -1;
  expect_fails(bad, "S5");
}

}  // namespace
}  // namespace kvsim
