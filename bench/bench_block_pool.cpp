// BlockPool / KVCacheManager throughput with the parameters of vLLM's
// benchmarks/benchmark_block_pool.py: a 100,000-block pool, get_new_blocks(n) then free_blocks of
// the same list (allocation order, as that script does), n in {10, 50, 100, 500, 1000} (its
// defaults) plus n = 1. bench/vllm_block_pool_compare.py runs vLLM's BlockPool with the same
// parameters and this binary in one sitting. Each row reports the time per call (one get + one
// free) and the ns_per_block counter (seconds per block: get + free of one block).
// BM_BaselineVectorStack is the same-run baseline: a bare std::vector used as a stack of ids, the
// least work any allocator can do.
#include <benchmark/benchmark.h>

#include <numeric>
#include <span>
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

void set_block_counters(benchmark::State& state, int64_t n) {
  const int64_t blocks = static_cast<int64_t>(state.iterations()) * n;
  state.SetItemsProcessed(blocks);
  state.counters["ns_per_block"] = benchmark::Counter(
      static_cast<double>(blocks), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// One iteration = get_new_blocks(n) + free_blocks(the same list), exactly the loop of
// benchmark_block_pool.py. Unhashed blocks are prepended, so every call reuses the same n blocks.
void BM_GetNewBlocksAndFree(benchmark::State& state) {
  const auto n = static_cast<int32_t>(state.range(0));
  const bool caching = state.range(1) != 0;
  kvsim::BlockPool pool(kPoolBlocks, caching);
  std::vector<kvsim::BlockId> got;
  got.reserve(static_cast<size_t>(n));
  for (auto _ : state) {
    got.clear();
    pool.get_new_blocks(n, got);
    pool.free_blocks(got);
    benchmark::DoNotOptimize(got.data());
  }
  set_block_counters(state, n);
  state.SetLabel(caching ? "caching on" : "caching off");
}

// Caching on with eviction: each iteration = get_new_blocks(n) + cache_full_blocks (every block
// gets a fresh key) + free_blocks. Hashed blocks are appended, so the pool cycles through all
// 100k blocks and every allocation evicts a cached block (a map erase) after the first lap. The
// keys are computed before timing (2 * pool size distinct keys, so a key comes back only after its
// previous block was evicted).
void BM_GetNewBlocksEvictingAndFree(benchmark::State& state) {
  const auto n = static_cast<int32_t>(state.range(0));
  kvsim::BlockPool pool(kPoolBlocks, true);
  std::vector<kvsim::BlockHash> keys(2 * static_cast<size_t>(kPoolBlocks));
  for (size_t i = 0; i < keys.size(); ++i) {
    keys[i] = kvsim::hash_block_unique(kvsim::none_hash(), i + 1, 0);
  }
  std::vector<kvsim::BlockId> got;
  got.reserve(static_cast<size_t>(n));
  // Untimed lap: every usable block cached once (one call), so every timed allocation evicts.
  const int32_t lap = pool.get_num_free_blocks();
  pool.get_new_blocks(lap, got);
  pool.cache_full_blocks(got, std::span(keys).first(static_cast<size_t>(lap)));
  pool.free_blocks(got);
  size_t next_key = static_cast<size_t>(lap);
  auto one_call = [&] {
    got.clear();
    pool.get_new_blocks(n, got);
    if (next_key + static_cast<size_t>(n) > keys.size()) next_key = 0;
    pool.cache_full_blocks(got, std::span(keys).subspan(next_key, static_cast<size_t>(n)));
    next_key += static_cast<size_t>(n);
    pool.free_blocks(got);
  };
  const int64_t evictions_before = pool.num_evictions();
  for (auto _ : state) {
    one_call();
    benchmark::DoNotOptimize(got.data());
  }
  if (pool.num_evictions() - evictions_before != static_cast<int64_t>(state.iterations()) * n) {
    state.SkipWithError("not every timed allocation evicted a cached block");
  }
  set_block_counters(state, n);
  state.SetLabel("caching on, evicting");
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
BENCHMARK(BM_GetNewBlocksEvictingAndFree)
    ->Arg(1)
    ->Arg(10)
    ->Arg(50)
    ->Arg(100)
    ->Arg(500)
    ->Arg(1000)
    ->ArgName("n");
BENCHMARK(BM_AllocateSlotsDecodeToken)->Arg(0)->Arg(1)->ArgName("caching");

BENCHMARK_MAIN();
