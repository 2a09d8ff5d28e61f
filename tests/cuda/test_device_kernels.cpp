// Device kernels against the host twin, element for element (skipped without a CUDA device).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kv_test_util.h"
#include "kvsim/cuda/host_kernels.h"
#include "kvsim/cuda/host_pool.h"
#include "kvsim/cuda/kv_backends.h"

#ifdef KVSIM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kvsim/cuda/device_kernels.h"
#include "kvsim/cuda/device_pool.h"
#endif

namespace kvsim {
namespace {

#ifdef KVSIM_HAVE_CUDA
template <class T>
T* to_device(const std::vector<T>& v) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, sizeof(T) * std::max<size_t>(v.size(), 1)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, v.data(), sizeof(T) * v.size(), cudaMemcpyHostToDevice), cudaSuccess);
  return static_cast<T*>(p);
}

std::vector<unsigned char> from_device(const DevicePool& pool) {
  std::vector<unsigned char> out(static_cast<size_t>(pool.bytes()));
  EXPECT_EQ(cudaMemcpy(out.data(), pool.data(), out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}
#endif

TEST(DeviceKernels, MatchHostTwinForEveryKernel) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
#ifdef KVSIM_HAVE_CUDA
  for (KvLayoutKind kind : {KvLayoutKind::kNhdPacked, KvLayoutKind::kLegacySplit}) {
    for (KvDtype dtype : {KvDtype::kBf16, KvDtype::kFp8E4m3, KvDtype::kFp32}) {
      KvCacheLayout l;
      l.num_blocks = 40;
      l.block_size = 16;
      l.num_layers = 3;
      l.num_kv_heads = 4;
      l.head_dim = 64;
      l.dtype = dtype;
      l.layout = kind;
      std::vector<int64_t> slots, req;
      std::vector<int32_t> pos;
      for (int64_t t = 0; t < 300; ++t) {
        slots.push_back(t % 11 == 5 ? kPadSlotId : (t * 37) % l.num_slots());
        req.push_back(t % 9);
        pos.push_back(static_cast<int32_t>(t));
      }
      const auto T = static_cast<int64_t>(slots.size());
      const int64_t stage = T * l.num_kv_heads * l.head_row_bytes() * l.num_layers;
      // Host twin.
      HostPool host(l);
      AlignedHostBuffer hk(stage), hv(stage);
      twin::gen_kv(l, 0, l.num_layers, req.data(), pos.data(), T, hk.data(), hv.data());
      twin::write_kv(l, host.data(), 0, l.num_layers, hk.data(), hv.data(), slots.data(), T);
      const std::vector<BlockCopy> pairs = {{2, 30}, {7, 31}, {0, 39}};
      twin::copy_blocks(l, host.data(), pairs.data(), 3);
      const std::vector<int32_t> lens = {50, 0, 33, 16};
      const std::vector<int32_t> offsets = {0, 4, 4, 7, 8};
      const std::vector<BlockId> tables = {30, 1, 2, 3, 31, 9, 10, 39};
      std::vector<uint64_t> host_sums(4);
      twin::gather_kv(l, host.data(), lens.data(), offsets.data(), tables.data(), 4,
                      host_sums.data());
      // Device.
      DevicePool dev(l);
      int64_t* d_slots = to_device(slots);
      int64_t* d_req = to_device(req);
      int32_t* d_pos = to_device(pos);
      unsigned char* dk = to_device(std::vector<unsigned char>(static_cast<size_t>(stage)));
      unsigned char* dv = to_device(std::vector<unsigned char>(static_cast<size_t>(stage)));
      device::gen_kv(l, 0, l.num_layers, d_req, d_pos, T, dk, dv, nullptr);
      device::write_kv(l, dev.data(), 0, l.num_layers, dk, dv, d_slots, T, nullptr);
      BlockCopy* d_pairs = to_device(pairs);
      device::copy_blocks(l, dev.data(), d_pairs, 3, nullptr);
      int32_t* d_lens = to_device(lens);
      int32_t* d_offsets = to_device(offsets);
      BlockId* d_tables = to_device(tables);
      uint64_t* d_sums = to_device(std::vector<uint64_t>(4, 99));
      device::gather_kv(l, dev.data(), d_lens, d_offsets, d_tables, 4, 8, d_sums, nullptr);
      std::vector<uint64_t> dev_sums(4);
      ASSERT_EQ(cudaMemcpy(dev_sums.data(), d_sums, 32, cudaMemcpyDeviceToHost), cudaSuccess);
      const std::vector<unsigned char> dev_pool = from_device(dev);
      EXPECT_EQ(std::memcmp(dev_pool.data(), host.data(), dev_pool.size()), 0)
          << kv_layout_name(kind) << " " << kv_dtype_name(dtype);
      EXPECT_EQ(dev_sums, host_sums);
      for (void* p : std::initializer_list<void*>{d_slots, d_req, d_pos, dk, dv, d_pairs, d_lens,
                                                  d_offsets, d_tables, d_sums}) {
        cudaFree(p);
      }
    }
  }
#endif
}

}  // namespace
}  // namespace kvsim
