// GPU benchmarks of the cuda room: each kernel's achieved bandwidth against a cudaMemcpy
// device-to-device copy measured in the same run (the practical ceiling).
//
// Timing: CUDA events around the timed work only (UseManualTime). Before every timed iteration
// the L2 is flushed by writing a buffer larger than it, so small working sets (decode) are not
// served from cache; big ones are >= 4x L2 anyway (H200: 50 MB L2). Bytes = read + written.
// Counters: GBps, pct_of_d2d (GBps / ceiling), and for allocators Gblocks_per_s.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvsim/core/block_pool.h"
#include "kvsim/cuda/block_allocator.h"
#include "kvsim/cuda/device_kernels.h"
#include "kvsim/cuda/device_pool.h"
#include "kvsim/cuda/kv_backends.h"

namespace {

using namespace kvsim;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
#define CK(call) check((call), #call)

template <class T>
T* dalloc(size_t n) {
  void* p = nullptr;
  CK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
  return static_cast<T*>(p);
}
template <class T>
T* upload(const std::vector<T>& v) {
  T* d = dalloc<T>(v.size());
  CK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

// Shared state: stream, events, the L2 flush buffer, the D2D ceiling.
struct Gpu {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  unsigned char* flush = nullptr;
  size_t flush_bytes = 0;
  Gpu() {
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CK(cudaEventCreate(&start));
    CK(cudaEventCreate(&stop));
    int dev = 0, l2 = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    flush_bytes = std::max<size_t>(size_t{4} * static_cast<size_t>(l2), size_t{64} << 20);
    flush = dalloc<unsigned char>(flush_bytes);
  }
  void flush_l2() { CK(cudaMemsetAsync(flush, 0x5A, flush_bytes, stream)); }
  void begin() { CK(cudaEventRecord(start, stream)); }
  // Ends the timed region, waits, returns seconds.
  double end() {
    CK(cudaEventRecord(stop, stream));
    CK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, start, stop));
    return ms * 1e-3;
  }
};

Gpu& gpu() {
  static Gpu g;
  return g;
}

// GB/s (read + written) of a 256 MiB cudaMemcpyAsync D2D, median of 15; measured once.
double d2d_ceiling_gbps() {
  static const double ceiling = [] {
    Gpu& g = gpu();
    const size_t n = size_t{256} << 20;
    unsigned char* a = dalloc<unsigned char>(n);
    unsigned char* b = dalloc<unsigned char>(n);
    CK(cudaMemsetAsync(a, 1, n, g.stream));
    std::vector<double> gbps;
    for (int i = 0; i < 15; ++i) {
      g.flush_l2();
      g.begin();
      CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, g.stream));
      gbps.push_back(2.0 * static_cast<double>(n) / g.end() / 1e9);
    }
    cudaFree(a);
    cudaFree(b);
    std::sort(gbps.begin(), gbps.end());
    return gbps[gbps.size() / 2];
  }();
  return ceiling;
}

// Runs `work` (enqueued on gpu().stream) per iteration with manual timing and sets the counters.
template <class Work>
void time_gpu(benchmark::State& state, double bytes_per_iter, Work&& work) {
  Gpu& g = gpu();
  double total = 0.0;
  for (auto _ : state) {
    g.flush_l2();
    g.begin();
    work();
    const double s = g.end();
    total += s;
    state.SetIterationTime(s);
  }
  const double gbps = bytes_per_iter * static_cast<double>(state.iterations()) / total / 1e9;
  state.SetBytesProcessed(static_cast<int64_t>(bytes_per_iter) * state.iterations());
  state.counters["GBps"] = gbps;
  state.counters["pct_of_d2d"] = 100.0 * gbps / d2d_ceiling_gbps();
  state.counters["MiB"] = bytes_per_iter / (1 << 20);
}

struct ModelShape {
  const char* name;
  int32_t layers, kv_heads, head_dim;
};
constexpr ModelShape kModels[] = {{"llama-3.1-8b", 32, 8, 128}, {"qwen2.5-7b", 28, 4, 128}};

KvCacheLayout layout_for(const ModelShape& m, int64_t num_blocks, int32_t block_size) {
  KvCacheLayout l;
  l.num_blocks = num_blocks;
  l.block_size = block_size;
  l.num_layers = m.layers;
  l.num_kv_heads = m.kv_heads;
  l.head_dim = m.head_dim;
  l.dtype = KvDtype::kBf16;
  l.layout = KvLayoutKind::kNhdPacked;
  return l;
}

void BM_MemcpyD2D(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0)) << 20;
  unsigned char* a = dalloc<unsigned char>(n);
  unsigned char* b = dalloc<unsigned char>(n);
  CK(cudaMemset(a, 1, n));
  time_gpu(state, 2.0 * static_cast<double>(n),
           [&] { CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, gpu().stream)); });
  cudaFree(a);
  cudaFree(b);
}

// write_kv over every layer in one launch: decode = 256 sequences x 1 token (each in its own
// block), prefill = 8192 tokens of one sequence in consecutive blocks.
void BM_WriteKv(benchmark::State& state) {
  const ModelShape& m = kModels[state.range(0)];
  const auto tokens = static_cast<int64_t>(state.range(1));
  const KvCacheLayout l = layout_for(m, 4096, 16);
  state.SetLabel(std::string(m.name) + (tokens <= 256 ? " decode" : " prefill"));
  DevicePool pool(l);
  std::vector<int64_t> slots(static_cast<size_t>(tokens)), req(slots.size());
  std::vector<int32_t> pos(slots.size());
  std::mt19937 rng(1);
  for (int64_t t = 0; t < tokens; ++t) {
    slots[static_cast<size_t>(t)] =
        tokens <= 256 ? (1 + t * 13) * 16 + static_cast<int64_t>(rng() % 16) : 16 + t;
    req[static_cast<size_t>(t)] = tokens <= 256 ? t : 0;
    pos[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  }
  const int64_t stage = tokens * l.num_kv_heads * l.head_row_bytes() * l.num_layers;
  unsigned char* key = dalloc<unsigned char>(static_cast<size_t>(stage));
  unsigned char* value = dalloc<unsigned char>(static_cast<size_t>(stage));
  int64_t* d_slots = upload(slots);
  int64_t* d_req = upload(req);
  int32_t* d_pos = upload(pos);
  device::gen_kv(l, 0, l.num_layers, d_req, d_pos, tokens, key, value, gpu().stream);
  const double bytes = 2.0 * static_cast<double>(tokens * l.token_layer_bytes() * l.num_layers);
  time_gpu(state, bytes, [&] {
    device::write_kv(l, pool.data(), 0, l.num_layers, key, value, d_slots, tokens, gpu().stream);
  });
  for (void* p : {static_cast<void*>(key), static_cast<void*>(value), static_cast<void*>(d_slots),
                  static_cast<void*>(d_req), static_cast<void*>(d_pos)}) {
    cudaFree(p);
  }
}

// gather_kv: 256 sequences x 512 tokens, Llama-3.1-8B heads, 8 layers (4 GiB read per
// iteration), block tables randomly permuted so pages are scattered as after a long run.
void BM_GatherKv(benchmark::State& state) {
  const auto bs = static_cast<int32_t>(state.range(0));
  const int32_t seqs = 256, seq_len = 512;
  const int32_t per_seq = seq_len / bs;
  ModelShape m = kModels[0];
  m.layers = 8;
  const KvCacheLayout l = layout_for(m, int64_t{seqs} * per_seq + 1, bs);
  DevicePool pool(l);
  std::vector<BlockId> tables(static_cast<size_t>(seqs) * per_seq);
  std::iota(tables.begin(), tables.end(), 1);
  std::shuffle(tables.begin(), tables.end(), std::mt19937(3));
  std::vector<int32_t> offsets(seqs + 1), lens(seqs, seq_len);
  for (int32_t s = 0; s <= seqs; ++s) offsets[static_cast<size_t>(s)] = s * per_seq;
  BlockId* d_tables = upload(tables);
  int32_t* d_offsets = upload(offsets);
  int32_t* d_lens = upload(lens);
  uint64_t* d_sums = dalloc<uint64_t>(seqs);
  const double bytes =
      static_cast<double>(int64_t{seqs} * seq_len * l.token_layer_bytes() * l.num_layers);
  state.SetLabel("block_size " + std::to_string(bs));
  time_gpu(state, bytes, [&] {
    device::gather_kv(l, pool.data(), d_lens, d_offsets, d_tables, seqs,
                      static_cast<int64_t>(tables.size()), d_sums, gpu().stream);
  });
  for (void* p : {static_cast<void*>(d_tables), static_cast<void*>(d_offsets),
                  static_cast<void*>(d_lens), static_cast<void*>(d_sums)}) {
    cudaFree(p);
  }
}

// copy_blocks: n (src, dst) pairs over every layer of Llama-3.1-8B (2 MiB per block).
void BM_CopyBlocks(benchmark::State& state) {
  const auto n = static_cast<int64_t>(state.range(0));
  const KvCacheLayout l = layout_for(kModels[0], 2 * n + 2, 16);
  DevicePool pool(l);
  std::vector<BlockCopy> pairs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    pairs[static_cast<size_t>(i)] = {static_cast<BlockId>(1 + i), static_cast<BlockId>(1 + n + i)};
  }
  BlockCopy* d_pairs = upload(pairs);
  const double bytes = 2.0 * static_cast<double>(n * l.block_bytes_all_layers());
  time_gpu(state, bytes, [&] { device::copy_blocks(l, pool.data(), d_pairs, n, gpu().stream); });
  cudaFree(d_pairs);
}

// swap_out / swap_in of n blocks (all layers of Llama-3.1-8B) through CudaKvBackend: pinned
// host pool, cuMemcpyBatchAsync when the driver has it. Times are the backend's CUDA events.
void BM_Swap(benchmark::State& state) {
  const bool out = state.range(0) == 0;
  const auto n = static_cast<int64_t>(state.range(1));
  const KvCacheLayout l = layout_for(kModels[0], n + 1, 16);
  CudaKvBackend backend(l, n);
  StepBatch b;
  b.block_size = 16;
  for (int64_t i = 0; i < n; ++i) {
    (out ? b.swap_out : b.swap_in).push_back({static_cast<BlockId>(1 + i), i});
  }
  double total = 0.0;
  for (auto _ : state) {
    const double s = backend.execute(b).device_seconds;
    total += s;
    state.SetIterationTime(s);
  }
  const double bytes = 2.0 * static_cast<double>(n * l.block_bytes_all_layers());
  const double gbps = bytes * static_cast<double>(state.iterations()) / total / 1e9;
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  state.counters["GBps"] = gbps;
  state.counters["pct_of_d2d"] = 100.0 * gbps / d2d_ceiling_gbps();
  state.counters["MiB"] = bytes / (1 << 20);
  state.SetLabel(std::string(out ? "swap_out" : "swap_in") +
                 (backend.uses_batched_memcpy() ? " cuMemcpyBatchAsync" : " cudaMemcpyAsync"));
}

// The GPU allocator: one batched allocate (+ one batched free, timed separately) for
// `requests` requests of `demand` blocks each, on a 1M-block pool.
void BM_GpuAllocator(benchmark::State& state) {
  const auto requests = static_cast<int32_t>(state.range(0));
  const auto demand = static_cast<int32_t>(state.range(1));
  const int32_t num_blocks = 1 << 20;
  GpuBlockAllocator alloc(num_blocks);
  int32_t* d_demands = upload(std::vector<int32_t>(static_cast<size_t>(requests), demand));
  int32_t* d_offsets = dalloc<int32_t>(static_cast<size_t>(requests) + 1);
  BlockId* d_ids = dalloc<BlockId>(static_cast<size_t>(num_blocks));
  int32_t* d_status = dalloc<int32_t>(1);
  const int64_t total = int64_t{requests} * demand;
  Gpu& g = gpu();
  double alloc_s = 0.0;
  for (auto _ : state) {
    g.begin();
    alloc.allocate_async(d_demands, requests, d_offsets, d_ids, d_status, g.stream);
    const double s = g.end();
    alloc_s += s;
    state.SetIterationTime(s);
    alloc.free_async(d_ids, total, d_status, g.stream);
  }
  CK(cudaStreamSynchronize(g.stream));
  int32_t status = -1;
  CK(cudaMemcpy(&status, d_status, sizeof status, cudaMemcpyDeviceToHost));
  if (status != 0) state.SkipWithError("allocator reported an error");
  state.counters["Gblocks_per_s"] =
      static_cast<double>(total) * static_cast<double>(state.iterations()) / alloc_s / 1e9;
  state.SetLabel(std::to_string(requests) + " requests x " + std::to_string(demand) + " blocks");
  for (void* p : {static_cast<void*>(d_demands), static_cast<void*>(d_offsets),
                  static_cast<void*>(d_ids), static_cast<void*>(d_status)}) {
    cudaFree(p);
  }
}

// The same batch through core's BlockPool (caching off) on the CPU, then the block table upload
// the GPU would need (offsets + ids, one cudaMemcpy each).
void BM_CoreAllocatorPlusUpload(benchmark::State& state) {
  const auto requests = static_cast<int32_t>(state.range(0));
  const auto demand = static_cast<int32_t>(state.range(1));
  BlockPool pool(1 << 20, /*enable_caching=*/false);
  const int64_t total = int64_t{requests} * demand;
  int32_t* d_offsets = dalloc<int32_t>(static_cast<size_t>(requests) + 1);
  BlockId* d_ids = dalloc<BlockId>(static_cast<size_t>(total));
  std::vector<BlockId> ids;
  std::vector<int32_t> offsets(static_cast<size_t>(requests) + 1);
  double alloc_s = 0.0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    ids.clear();
    for (int32_t r = 0; r < requests; ++r) {
      offsets[static_cast<size_t>(r)] = static_cast<int32_t>(ids.size());
      pool.get_new_blocks(demand, ids);
    }
    offsets.back() = static_cast<int32_t>(ids.size());
    CK(cudaMemcpy(d_offsets, offsets.data(), offsets.size() * sizeof(int32_t),
                  cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_ids, ids.data(), ids.size() * sizeof(BlockId), cudaMemcpyHostToDevice));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    alloc_s += s;
    state.SetIterationTime(s);
    pool.free_blocks(ids);
  }
  state.counters["Gblocks_per_s"] =
      static_cast<double>(total) * static_cast<double>(state.iterations()) / alloc_s / 1e9;
  state.SetLabel(std::to_string(requests) + " requests x " + std::to_string(demand) + " blocks");
  cudaFree(d_offsets);
  cudaFree(d_ids);
}

void register_all() {
  for (int64_t mib : {1, 64, 256, 1024}) {
    benchmark::RegisterBenchmark("BM_MemcpyD2D", BM_MemcpyD2D)->Arg(mib)->UseManualTime();
  }
  for (int64_t model : {0, 1}) {
    for (int64_t tokens : {256, 8192}) {
      benchmark::RegisterBenchmark("BM_WriteKv", BM_WriteKv)
          ->Args({model, tokens})
          ->UseManualTime();
    }
  }
  for (int64_t bs : {16, 32, 64, 128}) {
    benchmark::RegisterBenchmark("BM_GatherKv", BM_GatherKv)->Arg(bs)->UseManualTime();
  }
  for (int64_t n : {1, 64, 1024}) {
    benchmark::RegisterBenchmark("BM_CopyBlocks", BM_CopyBlocks)->Arg(n)->UseManualTime();
  }
  for (int64_t dir : {0, 1}) {
    for (int64_t n : {16, 256}) {
      benchmark::RegisterBenchmark("BM_Swap", BM_Swap)->Args({dir, n})->UseManualTime();
    }
  }
  for (int64_t demand : {1, 16}) {
    benchmark::RegisterBenchmark("BM_GpuAllocator", BM_GpuAllocator)
        ->Args({1024, demand})
        ->UseManualTime();
    benchmark::RegisterBenchmark("BM_CoreAllocatorPlusUpload", BM_CoreAllocatorPlusUpload)
        ->Args({1024, demand})
        ->UseManualTime();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_cuda_kernels: no CUDA device, nothing to measure\n");
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  try {
    std::printf("D2D ceiling (cudaMemcpyAsync 256 MiB, read + write): %.1f GB/s\n",
                d2d_ceiling_gbps());
    benchmark::AddCustomContext("d2d_ceiling_GBps", std::to_string(d2d_ceiling_gbps()));
    register_all();
    benchmark::RunSpecifiedBenchmarks();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_kernels: error: %s\n", e.what());
    return 2;
  }
  benchmark::Shutdown();
  return 0;
}
