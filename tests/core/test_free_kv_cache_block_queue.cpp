#include "kvsim/core/free_kv_cache_block_queue.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace kvsim {
namespace {

using V = std::vector<BlockId>;

TEST(FreeKVCacheBlockQueue, StartsAscendingAndPopsFromHead) {
  FreeKVCacheBlockQueue q(5);
  EXPECT_EQ(q.get_all_free_blocks(), (V{0, 1, 2, 3, 4}));
  EXPECT_EQ(q.popleft(), 0);
  V out;
  q.popleft_n(2, out);
  EXPECT_EQ(out, (V{1, 2}));
  EXPECT_EQ(q.num_free_blocks(), 2);
  EXPECT_EQ(q.get_all_free_blocks(), (V{3, 4}));
  q.check_invariants();
}

TEST(FreeKVCacheBlockQueue, PrependKeepsListOrderAppendGoesToTail) {
  FreeKVCacheBlockQueue q(6);
  V out;
  q.popleft_n(4, out);  // queue: [4, 5]
  q.prepend_n(V{2, 0});
  EXPECT_EQ(q.get_all_free_blocks(), (V{2, 0, 4, 5}));
  q.append_n(V{3, 1});
  EXPECT_EQ(q.get_all_free_blocks(), (V{2, 0, 4, 5, 3, 1}));
  q.remove(4);
  EXPECT_EQ(q.get_all_free_blocks(), (V{2, 0, 5, 3, 1}));
  EXPECT_FALSE(q.contains(4));
  EXPECT_TRUE(q.contains(5));
  q.check_invariants();
}

TEST(FreeKVCacheBlockQueue, MisuseThrows) {
  FreeKVCacheBlockQueue q(2);
  EXPECT_THROW(q.append(0), std::logic_error);  // already free
  V out;
  EXPECT_THROW(q.popleft_n(3, out), std::logic_error);
  q.popleft_n(2, out);
  EXPECT_THROW(q.popleft(), std::logic_error);
  EXPECT_THROW(q.remove(1), std::logic_error);
  q.append(1);
  EXPECT_EQ(q.get_all_free_blocks(), (V{1}));
}

}  // namespace
}  // namespace kvsim
