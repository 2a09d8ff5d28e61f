// CPU benchmarks of the host twin (the kv_ops.h kernels on Thrust's CPP system) and of the
// batched stack allocator next to core's BlockPool, so machines without a GPU produce numbers.
// Shapes: Llama-3.1-8B heads (8 KV heads x 128, bf16, v0.26 layout) with 4 layers; working sets
// are far larger than the CPU caches.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kvsim/core/block_pool.h"
#include "kvsim/cuda/block_allocator.h"
#include "kvsim/cuda/host_kernels.h"
#include "kvsim/cuda/host_pool.h"

namespace {

using namespace kvsim;

KvCacheLayout twin_layout(int64_t num_blocks, int32_t block_size) {
  KvCacheLayout l;
  l.num_blocks = num_blocks;
  l.block_size = block_size;
  l.num_layers = 4;
  l.num_kv_heads = 8;
  l.head_dim = 128;
  return l;
}

// Same-run baseline: a plain memcpy of 64 MiB (bytes = read + written, like the kernels below).
// Quote the twin kernels as a fraction of it; absolute CPU GB/s vary from machine to machine.
void BM_HostMemcpyBaseline(benchmark::State& state) {
  const size_t bytes = size_t{64} << 20;
  std::vector<unsigned char> src(bytes, 0x5A), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(2 * bytes) * state.iterations());
}
BENCHMARK(BM_HostMemcpyBaseline)->Unit(benchmark::kMicrosecond);

// write_kv of `tokens` tokens (decode: one per block; prefill: consecutive slots).
void BM_TwinWriteKv(benchmark::State& state) {
  const auto tokens = static_cast<int64_t>(state.range(0));
  const KvCacheLayout l = twin_layout(2048, 16);
  HostPool pool(l);
  std::vector<int64_t> slots(static_cast<size_t>(tokens)), req(slots.size());
  std::vector<int32_t> pos(slots.size());
  for (int64_t t = 0; t < tokens; ++t) {
    slots[static_cast<size_t>(t)] = tokens <= 256 ? (1 + t * 7) * 16 + t % 16 : 16 + t;
    req[static_cast<size_t>(t)] = t;
    pos[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  }
  const int64_t stage = tokens * l.num_kv_heads * l.head_row_bytes() * l.num_layers;
  AlignedHostBuffer key(stage), value(stage);
  twin::gen_kv(l, 0, l.num_layers, req.data(), pos.data(), tokens, key.data(), value.data());
  for (auto _ : state) {
    twin::write_kv(l, pool.data(), 0, l.num_layers, key.data(), value.data(), slots.data(), tokens);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(2 * tokens * l.token_layer_bytes() * l.num_layers * state.iterations());
}
BENCHMARK(BM_TwinWriteKv)->Arg(256)->Arg(4096)->Unit(benchmark::kMicrosecond);

void BM_TwinGatherKv(benchmark::State& state) {
  const auto bs = static_cast<int32_t>(state.range(0));
  const int32_t seqs = 64, seq_len = 512, per_seq = seq_len / bs;
  const KvCacheLayout l = twin_layout(int64_t{seqs} * per_seq + 1, bs);
  HostPool pool(l);
  std::vector<BlockId> tables(static_cast<size_t>(seqs) * per_seq);
  std::iota(tables.begin(), tables.end(), 1);
  std::shuffle(tables.begin(), tables.end(), std::mt19937(3));
  std::vector<int32_t> offsets(seqs + 1), lens(seqs, seq_len);
  for (int32_t s = 0; s <= seqs; ++s) offsets[static_cast<size_t>(s)] = s * per_seq;
  std::vector<uint64_t> sums(seqs);
  for (auto _ : state) {
    twin::gather_kv(l, pool.data(), lens.data(), offsets.data(), tables.data(), seqs, sums.data());
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(int64_t{seqs} * seq_len * l.token_layer_bytes() * l.num_layers *
                          state.iterations());
}
BENCHMARK(BM_TwinGatherKv)->Arg(16)->Arg(128)->Unit(benchmark::kMicrosecond);

void BM_TwinCopyBlocks(benchmark::State& state) {
  const auto n = static_cast<int64_t>(state.range(0));
  const KvCacheLayout l = twin_layout(2 * n + 2, 16);
  HostPool pool(l);
  std::vector<BlockCopy> pairs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    pairs[static_cast<size_t>(i)] = {static_cast<BlockId>(1 + i), static_cast<BlockId>(1 + n + i)};
  }
  for (auto _ : state) {
    twin::copy_blocks(l, pool.data(), pairs.data(), n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(2 * n * l.block_bytes_all_layers() * state.iterations());
}
BENCHMARK(BM_TwinCopyBlocks)->Arg(1)->Arg(64)->Arg(1024)->Unit(benchmark::kMicrosecond);

// Batched allocate + free of 1024 requests x demand blocks: the stack twin vs BlockPool.
void BM_TwinStackAllocator(benchmark::State& state) {
  const auto demand = static_cast<int32_t>(state.range(0));
  HostBlockAllocator alloc(1 << 20);
  const std::vector<int32_t> demands(1024, demand);
  std::vector<int32_t> offsets;
  std::vector<BlockId> ids;
  for (auto _ : state) {
    alloc.allocate(demands, offsets, ids);
    alloc.free(ids);
  }
  state.SetItemsProcessed(int64_t{1024} * demand * state.iterations());
}
BENCHMARK(BM_TwinStackAllocator)->Arg(1)->Arg(16);

void BM_CoreBlockPoolBatch(benchmark::State& state) {
  const auto demand = static_cast<int32_t>(state.range(0));
  BlockPool pool(1 << 20, /*enable_caching=*/false);
  std::vector<BlockId> ids;
  for (auto _ : state) {
    ids.clear();
    for (int r = 0; r < 1024; ++r) pool.get_new_blocks(demand, ids);
    pool.free_blocks(ids);
  }
  state.SetItemsProcessed(int64_t{1024} * demand * state.iterations());
}
BENCHMARK(BM_CoreBlockPoolBatch)->Arg(1)->Arg(16);

}  // namespace

BENCHMARK_MAIN();
