// BlockPool / KVCacheManager throughput (parameters of vLLM's benchmarks/benchmark_block_pool.py:
// a 100,000-block pool, allocate n blocks then free them, n in {1, 10, 50, 100, 500, 1000}).
// BM_BaselineVectorStack is the same-run baseline: a bare std::vector used as a stack of ids, the
// least work any allocator can do. Report BlockPool figures as a ratio to it.
#include <benchmark/benchmark.h>

#include <numeric>
#include <vector>

#include "kvsim/core/block_hash.h"
#include "kvsim/core/block_pool.h"
#include "kvsim/core/kv_cache_manager.h"

namespace {

constexpr int32_t kPoolBlocks = 100000;

void BM_BaselineVectorStack(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<kvsim::BlockId> stack(kPoolBlocks);
  std::iota(stack.begin(), stack.end(), 0);
  std::vector<kvsim::BlockId> got;
  got.reserve(n);
  for (auto _ : state) {
    got.assign(stack.end() - static_cast<long>(n), stack.end());
    stack.resize(stack.size() - n);
    benchmark::DoNotOptimize(got.data());
    stack.insert(stack.end(), got.rbegin(), got.rend());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}

// One iteration = get_new_blocks(n) + free_blocks(n blocks, reverse order): n alloc+free pairs.
void BM_GetNewBlocksAndFree(benchmark::State& state) {
  const auto n = static_cast<int32_t>(state.range(0));
  const bool caching = state.range(1) != 0;
  kvsim::BlockPool pool(kPoolBlocks, caching);
  std::vector<kvsim::BlockId> got;
  std::vector<kvsim::BlockId> rev;
  got.reserve(static_cast<size_t>(n));
  rev.reserve(static_cast<size_t>(n));
  for (auto _ : state) {
    got.clear();
    pool.get_new_blocks(n, got);
    rev.assign(got.rbegin(), got.rend());
    pool.free_blocks(rev);
    benchmark::DoNotOptimize(got.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n);
  state.SetLabel(caching ? "caching on" : "caching off");
}

// With caching on and every block hashed, allocation must also evict (lazy eviction at pop).
void BM_GetNewBlocksEvictingAndFree(benchmark::State& state) {
  const auto n = static_cast<int32_t>(state.range(0));
  kvsim::BlockPool pool(kPoolBlocks, true);
  std::vector<kvsim::BlockId> got;
  std::vector<kvsim::BlockHash> hashes(static_cast<size_t>(n));
  std::vector<kvsim::BlockId> rev;
  uint64_t salt = 0;
  for (auto _ : state) {
    got.clear();
    pool.get_new_blocks(n, got);
    for (auto& h : hashes) h = kvsim::hash_block_unique(kvsim::none_hash(), ++salt, 0);
    pool.cache_full_blocks(got, hashes);
    rev.assign(got.rbegin(), got.rend());
    pool.free_blocks(rev);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n);
}

// One decode token per call: the hot path of a replay (allocates a block every 16th call).
void BM_AllocateSlotsDecodeToken(benchmark::State& state) {
  const bool caching = state.range(0) != 0;
  constexpr int32_t kBs = 16;
  constexpr int32_t kMaxLen = 8192;
  kvsim::KVCacheManager m({.num_gpu_blocks = kPoolBlocks,
                           .block_size = kBs,
                           .max_model_len = kMaxLen,
                           .enable_caching = caching});
  kvsim::Request r;
  auto start = [&](int64_t id) {
    r = kvsim::Request{};
    r.request_id = id;
    r.num_prompt_tokens = 100;
    r.max_tokens = kMaxLen;
    r.content.salt = static_cast<uint64_t>(id) + 1;
    if (caching) r.enable_block_hashing(kBs);
    m.allocate_slots(r, {.num_new_tokens = 100});
    r.num_computed_tokens = 100;
    r.status = kvsim::RequestStatus::RUNNING;
  };
  int64_t id = 0;
  start(id);
  for (auto _ : state) {
    if (r.num_tokens() + 1 >= kMaxLen) {
      m.free(r);
      start(++id);
    }
    r.append_output_tokens(1);
    auto out = m.allocate_slots(r, {.num_new_tokens = 1});
    benchmark::DoNotOptimize(out);
    r.num_computed_tokens += 1;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.SetLabel(caching ? "caching on" : "caching off");
}

}  // namespace

BENCHMARK(BM_BaselineVectorStack)->Arg(1)->Arg(10)->Arg(50)->Arg(100)->Arg(500)->Arg(1000);
BENCHMARK(BM_GetNewBlocksAndFree)
    ->ArgsProduct({{1, 10, 50, 100, 500, 1000}, {0, 1}})
    ->ArgNames({"n", "caching"});
BENCHMARK(BM_GetNewBlocksEvictingAndFree)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_AllocateSlotsDecodeToken)->Arg(0)->Arg(1)->ArgName("caching");

BENCHMARK_MAIN();
