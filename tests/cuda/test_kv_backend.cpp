// HostKvBackend (and CudaKvBackend when a device exists) driven by realistic StepBatch streams.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "kv_test_util.h"
#include "kvsim/cuda/backend_factory.h"
#include "kvsim/cuda/kv_backends.h"

namespace kvsim {
namespace {

KvCacheLayout test_layout(KvLayoutKind kind = KvLayoutKind::kNhdPacked,
                          KvDtype dtype = KvDtype::kBf16) {
  KvCacheLayout l;
  l.num_blocks = 96;
  l.block_size = 16;
  l.num_layers = 2;
  l.num_kv_heads = 2;
  l.head_dim = dtype == KvDtype::kFp8E4m3 ? 32 : 16;
  l.dtype = dtype;
  l.layout = kind;
  return l;
}

TEST(HostKvBackend, ReplaysSwapsCopiesWritesReadsAndVerifies) {
  for (KvLayoutKind kind : {KvLayoutKind::kNhdPacked, KvLayoutKind::kLegacySplit}) {
    const KvCacheLayout l = test_layout(kind, KvDtype::kFp8E4m3);
    HostKvBackend backend(l, /*host_swap_slots=*/64);
    test::BatchGenerator gen(static_cast<int32_t>(l.num_blocks), l.block_size, 64, 42);
    int64_t swaps = 0, copies = 0, reads = 0;
    for (int step = 0; step < 150; ++step) {
      const StepBatch b = gen.next();
      const StepExecution ex = backend.execute(b);
      swaps += static_cast<int64_t>(b.swap_out.size() + b.swap_in.size());
      copies += static_cast<int64_t>(b.copies.size());
      const StepExecution want = step_traffic(l, b);
      EXPECT_EQ(ex.bytes_read, want.bytes_read);
      EXPECT_EQ(ex.bytes_written, want.bytes_written);
      ASSERT_EQ(backend.last_read_checksums().size(), b.reads.size());
      for (uint64_t c : backend.last_read_checksums()) reads += c != 0 ? 1 : 0;
      if (step % 50 == 49) {
        const BackendVerification v = backend.verify();
        ASSERT_TRUE(v.ok) << v.detail;
        EXPECT_EQ(v.slots_checked, l.num_slots());
      }
    }
    // The generator really exercised every path.
    EXPECT_GT(swaps, 0);
    EXPECT_GT(copies, 0);
    EXPECT_GT(reads, 100);
  }
}

TEST(HostKvBackend, ChecksumsEqualTheScalarReference) {
  const KvCacheLayout l = test_layout();
  HostKvBackend backend(l, 0);
  StepBatch b;
  b.block_size = 16;
  b.writes = {{7, 0, 20}, {9, 0, 3}};
  for (int p = 0; p < 20; ++p) b.slot_mapping.push_back((p < 16 ? 5 * 16 : 2 * 16) + p % 16);
  for (int p = 0; p < 3; ++p) b.slot_mapping.push_back(40 * 16 + p);
  b.reads = {{7, 20}, {9, 3}};
  b.block_table_offsets = {0, 2, 3};
  b.block_tables = {5, 2, 40};
  backend.execute(b);
  std::vector<unsigned char> ref(static_cast<size_t>(l.pool_bytes()), kPoisonByte);
  std::vector<int64_t> req;
  std::vector<int32_t> pos;
  for (int p = 0; p < 20; ++p) {
    req.push_back(7);
    pos.push_back(p);
  }
  for (int p = 0; p < 3; ++p) {
    req.push_back(9);
    pos.push_back(p);
  }
  test::ref_write(l, ref, b.slot_mapping, req, pos);
  ASSERT_EQ(std::memcmp(backend.pool().data(), ref.data(), ref.size()), 0);
  EXPECT_EQ(backend.last_read_checksums()[0], test::ref_checksum(l, ref, {5, 2}, 20));
  EXPECT_EQ(backend.last_read_checksums()[1], test::ref_checksum(l, ref, {40}, 3));
  EXPECT_TRUE(backend.verify().ok);
}

TEST(HostKvBackend, VerifyReportsCorruption) {
  const KvCacheLayout l = test_layout();
  HostKvBackend backend(l, 0);
  StepBatch b;
  b.block_size = 16;
  b.writes = {{3, 0, 2}};
  b.slot_mapping = {33, 34};
  backend.execute(b);
  ASSERT_TRUE(backend.verify().ok);
  // Flip one byte of slot 34 (block 2, offset 2), layer 1.
  auto* pool = const_cast<unsigned char*>(backend.pool().data());
  pool[l.head_row_offset(1, 34, 1, 1) + 3] ^= 0x40;
  const BackendVerification v = backend.verify();
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.detail.find("slot 34 (block 2, offset 2), layer 1: expected request 3 position 1"),
            std::string::npos)
      << v.detail;
  // A never-written slot that changed is caught too (it must still hold poison).
  pool[l.head_row_offset(1, 34, 1, 1) + 3] ^= 0x40;
  pool[l.head_row_offset(0, 90, 0, 0)] = 0;
  EXPECT_NE(backend.verify().detail.find("poison"), std::string::npos);
}

TEST(HostKvBackend, RejectsMalformedBatchesWithContext) {
  HostKvBackend backend(test_layout(), 4);
  auto message = [&](const StepBatch& b) {
    try {
      backend.execute(b);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  StepBatch b;
  b.step_index = 12;
  b.block_size = 16;
  b.writes = {{1, 0, 1}};
  b.slot_mapping = {96 * 16};
  EXPECT_EQ(message(b), "step 12: slot_mapping[0] = 1536 is out of range [0, 1536)");
  b.slot_mapping = {};
  EXPECT_EQ(message(b), "step 12: slot_mapping has 0 slots but the writes have 1 tokens");
  b = StepBatch{};
  b.block_size = 32;
  EXPECT_EQ(message(b), "step 0: block_size = 32 but the KV pool has 16");
  b = StepBatch{};
  b.swap_out = {{3, 4}};
  EXPECT_EQ(message(b), "step 0: swap_out.host_slot[0] = 4 is out of range [0, 4)");
  b = StepBatch{};
  b.reads = {{5, 33}};
  b.block_table_offsets = {0, 2};
  b.block_tables = {1, 2};
  EXPECT_EQ(message(b),
            "step 0: reads[0] (request 5) has seq_len 33 but its block table has 2 blocks");
}

TEST(BackendFactory, BuildsNullAndHostAndExplainsCuda) {
  KvBackendConfig c;
  c.num_blocks = 64;
  c.num_layers = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  EXPECT_STREQ(make_kv_backend(c)->name(), "null");
  c.kind = parse_kv_backend_kind("host");
  c.max_layers = 2;
  EXPECT_EQ(c.pool_layout().num_layers, 2);
  auto host = make_kv_backend(c);
  EXPECT_STREQ(host->name(), "host");
  EXPECT_EQ(dynamic_cast<HostKvBackend&>(*host).pool().bytes(), int64_t{64} * 16 * 8 * 256 * 2 * 2);
  c.max_host_pool_bytes = 1024;
  EXPECT_THROW(make_kv_backend(c), std::runtime_error);
  EXPECT_THROW(parse_kv_backend_kind("gpu"), std::invalid_argument);
  c.kind = KvBackendKind::kCuda;
  if (cuda_device_count() == 0) {
    try {
      make_kv_backend(c);
      ADD_FAILURE() << "cuda backend without a device";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
    }
  }
}

TEST(CudaKvBackend, MatchesHostTwinStepByStep) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  for (KvLayoutKind kind : {KvLayoutKind::kNhdPacked, KvLayoutKind::kLegacySplit}) {
    const KvCacheLayout l = test_layout(kind);
    HostKvBackend host(l, 64);
    CudaKvBackend cuda(l, 64);
    test::BatchGenerator gen(static_cast<int32_t>(l.num_blocks), l.block_size, 64, 9);
    for (int step = 0; step < 120; ++step) {
      const StepBatch b = gen.next();
      const StepExecution h = host.execute(b);
      const StepExecution d = cuda.execute(b);
      EXPECT_EQ(h.bytes_read, d.bytes_read);
      EXPECT_GE(d.device_seconds, 0.0);
      ASSERT_EQ(std::vector<uint64_t>(host.last_read_checksums().begin(),
                                      host.last_read_checksums().end()),
                std::vector<uint64_t>(cuda.last_read_checksums().begin(),
                                      cuda.last_read_checksums().end()))
          << "step " << step;
    }
    const BackendVerification v = cuda.verify();
    EXPECT_TRUE(v.ok) << v.detail;
  }
}

}  // namespace
}  // namespace kvsim
