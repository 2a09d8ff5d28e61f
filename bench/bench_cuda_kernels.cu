// GPU benchmarks of the cuda room: each kernel's achieved bandwidth against baselines measured in
// the same run: a cudaMemcpy device-to-device copy (the practical ceiling of the device-side
// kernels) and pinned host<->device copies (the ceiling of swap).
//
// Timing: CUDA events around the timed work only (UseManualTime). Before every timed iteration
// the L2 is flushed by READING a buffer of max(4x L2, 64 MiB): a read leaves only clean lines in
// L2, so no write-back of the flush lands in the timed region (a memset flush would leave dirty
// lines that the timed kernel pays for). Bytes = read + written.
// Counters: GBps, pct_of_d2d (GBps / D2D baseline), for allocators Gblocks_per_s, for host<->device
// copies xfer_GBps (bytes across the link, counted once) and pct_of_pinned (swap rows).
//
// Errors never end the binary: a CUDA error or any exception inside a benchmark becomes that row's
// error (SkipWithError: "error_occurred"/"error_message" in the JSON), so bench_cuda.json is always
// complete, valid JSON. Without a CUDA device every row is the error "no CUDA device".
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
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

// Owns n elements of device (or pinned host) memory; freed on every path, exceptions included, so
// one failing row cannot leak memory into the next.
template <class T, bool kPinnedHost = false>
class Buffer {
 public:
  explicit Buffer(size_t n) {
    void* p = nullptr;
    const size_t bytes = std::max<size_t>(n, 1) * sizeof(T);
    if constexpr (kPinnedHost) {
      CK(cudaMallocHost(&p, bytes));
    } else {
      CK(cudaMalloc(&p, bytes));
    }
    p_ = static_cast<T*>(p);
  }
  Buffer(Buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer& operator=(Buffer&&) = delete;
  ~Buffer() {
    if constexpr (kPinnedHost) {
      cudaFreeHost(p_);
    } else {
      cudaFree(p_);
    }
  }
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
};
template <class T>
using DeviceBuffer = Buffer<T, false>;
template <class T>
using PinnedBuffer = Buffer<T, true>;

template <class T>
DeviceBuffer<T> upload(const std::vector<T>& v) {
  DeviceBuffer<T> d(v.size());
  CK(cudaMemcpy(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

// The L2 flush: every thread reads 16-byte vectors of the buffer; the xor of what it read decides
// a store that never happens for the buffer's fill pattern, so the loads cannot be dropped.
constexpr int kFlushThreads = 256;
__global__ void __launch_bounds__(kFlushThreads)
    l2_flush_read_kernel(const uint4* __restrict__ buf, size_t n, unsigned* sink) {
  unsigned acc = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint4 v = buf[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) *sink = acc;
}

// Shared state: stream, events, the L2 flush buffer.
struct Gpu {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  std::optional<DeviceBuffer<uint4>> flush;
  std::optional<DeviceBuffer<unsigned>> sink;
  size_t flush_bytes = 0;
  int sms = 0;
  int l2_bytes = 0;
  Gpu() {
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CK(cudaEventCreate(&start));
    CK(cudaEventCreate(&stop));
    int dev = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    flush_bytes = std::max<size_t>(size_t{4} * static_cast<size_t>(l2_bytes), size_t{64} << 20);
    flush.emplace(flush_bytes / sizeof(uint4));
    sink.emplace(1);
    // Filled once; the fill's dirty lines are evicted by this first flush, before any timing.
    CK(cudaMemsetAsync(flush->get(), 0x5A, flush_bytes, stream));
    flush_l2();
    CK(cudaStreamSynchronize(stream));
  }
  void flush_l2() {
    l2_flush_read_kernel<<<static_cast<unsigned>(sms) * 8, kFlushThreads, 0, stream>>>(
        flush->get(), flush_bytes / sizeof(uint4), sink->get());
    CK(cudaGetLastError());
  }
  void begin() { CK(cudaEventRecord(start, stream)); }
  // Ends the timed region, waits, returns seconds. Also surfaces errors of the timed work.
  double end() {
    CK(cudaGetLastError());
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

// Same-run baselines, measured once in main() before any benchmark. A baseline that could not be
// measured holds its error; rows that need it report that error.
struct Baseline {
  double gbps = 0.0;  // read + written (D2D) or bytes across the link once (pinned copies)
  std::string error = "not measured";
  double get(const char* what) const {
    if (gbps <= 0.0)
      throw std::runtime_error(std::string(what) + " baseline unavailable: " + error);
    return gbps;
  }
};
Baseline g_d2d, g_h2d, g_d2h;

constexpr size_t kD2dBaselineBytes = size_t{256} << 20;
constexpr size_t kPinnedBaselineBytes = size_t{512} << 20;  // = the 256-block swap rows

// Median GB/s of 15 copies of `n` bytes from src to dst (kind), L2 flushed before each; `factor`
// converts bytes copied into bytes counted (2 = read + written).
double median_copy_gbps(void* dst, const void* src, size_t n, cudaMemcpyKind kind, double factor) {
  Gpu& g = gpu();
  std::vector<double> gbps;
  for (int i = 0; i < 15; ++i) {
    g.flush_l2();
    g.begin();
    CK(cudaMemcpyAsync(dst, src, n, kind, g.stream));
    gbps.push_back(factor * static_cast<double>(n) / g.end() / 1e9);
  }
  std::sort(gbps.begin(), gbps.end());
  return gbps[gbps.size() / 2];
}

template <class F>
void measure_baseline(Baseline& b, F&& f) {
  try {
    b.gbps = f();
    b.error.clear();
  } catch (const std::exception& e) {
    b.gbps = 0.0;
    b.error = e.what();
  }
}

void measure_baselines() {
  measure_baseline(g_d2d, [] {
    DeviceBuffer<unsigned char> a(kD2dBaselineBytes), b(kD2dBaselineBytes);
    CK(cudaMemset(a.get(), 1, kD2dBaselineBytes));
    return median_copy_gbps(b.get(), a.get(), kD2dBaselineBytes, cudaMemcpyDeviceToDevice, 2.0);
  });
  for (const bool to_device : {true, false}) {
    measure_baseline(to_device ? g_h2d : g_d2h, [to_device] {
      DeviceBuffer<unsigned char> d(kPinnedBaselineBytes);
      PinnedBuffer<unsigned char> h(kPinnedBaselineBytes);
      std::fill_n(h.get(), kPinnedBaselineBytes, static_cast<unsigned char>(1));
      CK(cudaMemset(d.get(), 1, kPinnedBaselineBytes));
      return to_device ? median_copy_gbps(d.get(), h.get(), kPinnedBaselineBytes,
                                          cudaMemcpyHostToDevice, 1.0)
                       : median_copy_gbps(h.get(), d.get(), kPinnedBaselineBytes,
                                          cudaMemcpyDeviceToHost, 1.0);
    });
  }
}

// Runs `work` (enqueued on gpu().stream) per iteration with manual timing and sets the counters.
template <class Work>
void time_gpu(benchmark::State& state, double bytes_per_iter, Work&& work) {
  Gpu& g = gpu();
  const double d2d = g_d2d.get("D2D");
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
  state.counters["pct_of_d2d"] = 100.0 * gbps / d2d;
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
  DeviceBuffer<unsigned char> a(n), b(n);
  CK(cudaMemset(a.get(), 1, n));
  time_gpu(state, 2.0 * static_cast<double>(n), [&] {
    CK(cudaMemcpyAsync(b.get(), a.get(), n, cudaMemcpyDeviceToDevice, gpu().stream));
  });
  state.SetLabel("cudaMemcpyAsync D2D");
}

// Pinned host<->device cudaMemcpyAsync of the swap rows' sizes: the link's practical ceiling.
void BM_MemcpyPinned(benchmark::State& state) {
  const bool to_device = state.range(0) == 1;
  const auto n = static_cast<size_t>(state.range(1)) << 20;
  DeviceBuffer<unsigned char> d(n);
  PinnedBuffer<unsigned char> h(n);
  std::fill_n(h.get(), n, static_cast<unsigned char>(1));
  CK(cudaMemset(d.get(), 1, n));
  Gpu& g = gpu();
  double total = 0.0;
  for (auto _ : state) {
    g.flush_l2();
    g.begin();
    CK(to_device ? cudaMemcpyAsync(d.get(), h.get(), n, cudaMemcpyHostToDevice, g.stream)
                 : cudaMemcpyAsync(h.get(), d.get(), n, cudaMemcpyDeviceToHost, g.stream));
    const double s = g.end();
    total += s;
    state.SetIterationTime(s);
  }
  const double xfer =
      static_cast<double>(n) * static_cast<double>(state.iterations()) / total / 1e9;
  state.SetBytesProcessed(static_cast<int64_t>(n) * state.iterations());
  state.counters["GBps"] = 2.0 * xfer;
  state.counters["xfer_GBps"] = xfer;
  state.counters["MiB"] = 2.0 * static_cast<double>(n) / (1 << 20);
  state.SetLabel(to_device ? "pinned H2D" : "pinned D2H");
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
  DeviceBuffer<unsigned char> key(static_cast<size_t>(stage)), value(static_cast<size_t>(stage));
  const DeviceBuffer<int64_t> d_slots = upload(slots);
  const DeviceBuffer<int64_t> d_req = upload(req);
  const DeviceBuffer<int32_t> d_pos = upload(pos);
  device::gen_kv(l, 0, l.num_layers, d_req.get(), d_pos.get(), tokens, key.get(), value.get(),
                 gpu().stream);
  const double bytes = 2.0 * static_cast<double>(tokens * l.token_layer_bytes() * l.num_layers);
  time_gpu(state, bytes, [&] {
    device::write_kv(l, pool.data(), 0, l.num_layers, key.get(), value.get(), d_slots.get(), tokens,
                     gpu().stream);
  });
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
  state.SetLabel("block_size " + std::to_string(bs));
  DevicePool pool(l);
  std::vector<BlockId> tables(static_cast<size_t>(seqs) * per_seq);
  std::iota(tables.begin(), tables.end(), 1);
  std::shuffle(tables.begin(), tables.end(), std::mt19937(3));
  std::vector<int32_t> offsets(seqs + 1), lens(seqs, seq_len);
  for (int32_t s = 0; s <= seqs; ++s) offsets[static_cast<size_t>(s)] = s * per_seq;
  const DeviceBuffer<BlockId> d_tables = upload(tables);
  const DeviceBuffer<int32_t> d_offsets = upload(offsets);
  const DeviceBuffer<int32_t> d_lens = upload(lens);
  DeviceBuffer<uint64_t> d_sums(seqs);
  const double bytes =
      static_cast<double>(int64_t{seqs} * seq_len * l.token_layer_bytes() * l.num_layers);
  time_gpu(state, bytes, [&] {
    device::gather_kv(l, pool.data(), d_lens.get(), d_offsets.get(), d_tables.get(), seqs,
                      static_cast<int64_t>(tables.size()), d_sums.get(), gpu().stream);
  });
}

// copy_blocks: n (src, dst) pairs over every layer of Llama-3.1-8B (2 MiB per block).
void BM_CopyBlocks(benchmark::State& state) {
  const auto n = static_cast<int64_t>(state.range(0));
  const KvCacheLayout l = layout_for(kModels[0], 2 * n + 2, 16);
  state.SetLabel(std::to_string(n) + " blocks x 2 MiB");
  DevicePool pool(l);
  std::vector<BlockCopy> pairs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    pairs[static_cast<size_t>(i)] = {static_cast<BlockId>(1 + i), static_cast<BlockId>(1 + n + i)};
  }
  const DeviceBuffer<BlockCopy> d_pairs = upload(pairs);
  const double bytes = 2.0 * static_cast<double>(n * l.block_bytes_all_layers());
  time_gpu(state, bytes,
           [&] { device::copy_blocks(l, pool.data(), d_pairs.get(), n, gpu().stream); });
  state.counters["blocks"] = static_cast<double>(n);
}

// swap_out / swap_in of n blocks (all layers of Llama-3.1-8B) through CudaKvBackend: pinned
// host pool, cuMemcpyBatchAsync when the driver has it. Times are the backend's CUDA events.
// Judged against the same-run pinned cudaMemcpy of kPinnedBaselineBytes in the same direction.
void BM_Swap(benchmark::State& state) {
  const bool out = state.range(0) == 0;
  const auto n = static_cast<int64_t>(state.range(1));
  const KvCacheLayout l = layout_for(kModels[0], n + 1, 16);
  state.SetLabel(out ? "swap_out" : "swap_in");
  const double pinned = (out ? g_d2h : g_h2d).get(out ? "pinned D2H" : "pinned H2D");
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
  const double moved = static_cast<double>(n * l.block_bytes_all_layers());
  const double xfer = moved * static_cast<double>(state.iterations()) / total / 1e9;
  state.SetBytesProcessed(static_cast<int64_t>(2.0 * moved) * state.iterations());
  state.counters["GBps"] = 2.0 * xfer;
  state.counters["xfer_GBps"] = xfer;
  state.counters["pct_of_pinned"] = 100.0 * xfer / pinned;
  state.counters["MiB"] = 2.0 * moved / (1 << 20);
  state.counters["blocks"] = static_cast<double>(n);
  state.SetLabel(std::string(out ? "swap_out" : "swap_in") +
                 (backend.uses_batched_memcpy() ? " cuMemcpyBatchAsync" : " cudaMemcpyAsync"));
}

// The GPU allocator: one batched allocate (+ one batched free, timed separately) for
// `requests` requests of `demand` blocks each, on a 1M-block pool.
void BM_GpuAllocator(benchmark::State& state) {
  const auto requests = static_cast<int32_t>(state.range(0));
  const auto demand = static_cast<int32_t>(state.range(1));
  state.SetLabel(std::to_string(requests) + " requests x " + std::to_string(demand) + " blocks");
  const int32_t num_blocks = 1 << 20;
  GpuBlockAllocator alloc(num_blocks);
  const DeviceBuffer<int32_t> d_demands =
      upload(std::vector<int32_t>(static_cast<size_t>(requests), demand));
  DeviceBuffer<int32_t> d_offsets(static_cast<size_t>(requests) + 1);
  DeviceBuffer<BlockId> d_ids(static_cast<size_t>(num_blocks));
  DeviceBuffer<int32_t> d_status(1);
  const int64_t total = int64_t{requests} * demand;
  Gpu& g = gpu();
  double alloc_s = 0.0;
  for (auto _ : state) {
    g.begin();
    alloc.allocate_async(d_demands.get(), requests, d_offsets.get(), d_ids.get(), d_status.get(),
                         g.stream);
    const double s = g.end();
    alloc_s += s;
    state.SetIterationTime(s);
    alloc.free_async(d_ids.get(), total, d_status.get(), g.stream);
  }
  CK(cudaStreamSynchronize(g.stream));
  int32_t status = -1;
  CK(cudaMemcpy(&status, d_status.get(), sizeof status, cudaMemcpyDeviceToHost));
  if (status != 0) {
    throw std::runtime_error("GpuBlockAllocator reported status " + std::to_string(status));
  }
  state.counters["Gblocks_per_s"] =
      static_cast<double>(total) * static_cast<double>(state.iterations()) / alloc_s / 1e9;
}

// The same batch through core's BlockPool (caching off) on the CPU, then the block table upload
// the GPU would need (offsets + ids, one cudaMemcpy each).
void BM_CoreAllocatorPlusUpload(benchmark::State& state) {
  const auto requests = static_cast<int32_t>(state.range(0));
  const auto demand = static_cast<int32_t>(state.range(1));
  state.SetLabel(std::to_string(requests) + " requests x " + std::to_string(demand) + " blocks");
  BlockPool pool(1 << 20, /*enable_caching=*/false);
  const int64_t total = int64_t{requests} * demand;
  DeviceBuffer<int32_t> d_offsets(static_cast<size_t>(requests) + 1);
  DeviceBuffer<BlockId> d_ids(static_cast<size_t>(total));
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
    CK(cudaMemcpy(d_offsets.get(), offsets.data(), offsets.size() * sizeof(int32_t),
                  cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_ids.get(), ids.data(), ids.size() * sizeof(BlockId), cudaMemcpyHostToDevice));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    alloc_s += s;
    state.SetIterationTime(s);
    pool.free_blocks(ids);
  }
  state.counters["Gblocks_per_s"] =
      static_cast<double>(total) * static_cast<double>(state.iterations()) / alloc_s / 1e9;
}

// Every benchmark runs through this: no device, a CUDA error or any exception becomes the row's
// error instead of ending the process (which would cut bench_cuda.json short).
// Empty when a device is usable; else why not, with the runtime's own words (an old driver
// reads "CUDA driver version is insufficient for CUDA runtime version", not just "none").
std::string no_device_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n > 0) return "";
  cudaGetLastError();  // clear the error so later calls do not report it again
  return std::string("no CUDA device (cudaGetDeviceCount: ") +
         (e == cudaSuccess ? "0 devices" : cudaGetErrorString(e)) + ")";
}

using BenchFn = void (*)(benchmark::State&);
template <BenchFn kFn>
void guarded(benchmark::State& state) {
  try {
    if (const std::string why = no_device_reason(); !why.empty()) {
      state.SkipWithError(why.c_str());
      return;
    }
    kFn(state);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  } catch (...) {
    state.SkipWithError("unknown exception");
  }
}

template <BenchFn kFn>
benchmark::internal::Benchmark* add(const char* name) {
  return benchmark::RegisterBenchmark(name, guarded<kFn>)->UseManualTime();
}

void register_all() {
  // Argument names make the row names (e.g. BM_WriteKv/model:0/tokens:8192/manual_time) say
  // what a row is even when it failed before setting its label; the summarizer selects by them.
  for (int64_t mib : {1, 64, 256, 1024}) {
    add<BM_MemcpyD2D>("BM_MemcpyD2D")->ArgName("MiB")->Arg(mib);
  }
  for (int64_t to_device : {1, 0}) {
    for (int64_t mib : {32, 512}) {
      add<BM_MemcpyPinned>("BM_MemcpyPinned")->ArgNames({"h2d", "MiB"})->Args({to_device, mib});
    }
  }
  for (int64_t model : {0, 1}) {
    for (int64_t tokens : {256, 8192}) {
      add<BM_WriteKv>("BM_WriteKv")->ArgNames({"model", "tokens"})->Args({model, tokens});
    }
  }
  for (int64_t bs : {16, 32, 64, 128}) add<BM_GatherKv>("BM_GatherKv")->ArgName("bs")->Arg(bs);
  for (int64_t n : {1, 64, 1024}) add<BM_CopyBlocks>("BM_CopyBlocks")->ArgName("blocks")->Arg(n);
  for (int64_t dir : {0, 1}) {
    for (int64_t n : {16, 256}) {
      add<BM_Swap>("BM_Swap")->ArgNames({"in", "blocks"})->Args({dir, n});
    }
  }
  for (int64_t demand : {1, 16}) {
    add<BM_GpuAllocator>("BM_GpuAllocator")->ArgNames({"requests", "demand"})->Args({1024, demand});
    add<BM_CoreAllocatorPlusUpload>("BM_CoreAllocatorPlusUpload")
        ->ArgNames({"requests", "demand"})
        ->Args({1024, demand});
  }
}

// The device and the baselines, as JSON context (strings: Google Benchmark's custom context).
void add_context() {
  const int devices = cuda_device_count();
  benchmark::AddCustomContext("cuda_device_count", std::to_string(devices));
  if (devices == 0) {
    benchmark::AddCustomContext("device_error", no_device_reason());
    return;
  }
  try {
    cudaDeviceProp p{};
    CK(cudaGetDeviceProperties(&p, 0));
    benchmark::AddCustomContext("device_name", p.name);
    benchmark::AddCustomContext("compute_capability",
                                std::to_string(p.major) + "." + std::to_string(p.minor));
    Gpu& g = gpu();
    benchmark::AddCustomContext("sm_count", std::to_string(g.sms));
    benchmark::AddCustomContext("l2_bytes", std::to_string(g.l2_bytes));
    benchmark::AddCustomContext("l2_flush", "read of " + std::to_string(g.flush_bytes) + " bytes");
  } catch (const std::exception& e) {
    benchmark::AddCustomContext("device_error", e.what());
  }
  measure_baselines();
  const std::pair<const char*, const Baseline*> baselines[] = {
      {"d2d_ceiling_GBps", &g_d2d}, {"pinned_h2d_GBps", &g_h2d}, {"pinned_d2h_GBps", &g_d2h}};
  for (const auto& [key, b] : baselines) {
    benchmark::AddCustomContext(key,
                                b->error.empty() ? std::to_string(b->gbps) : "error: " + b->error);
  }
  benchmark::AddCustomContext("d2d_baseline", "cudaMemcpyAsync D2D of " +
                                                  std::to_string(kD2dBaselineBytes >> 20) +
                                                  " MiB, read + write, median of 15");
  benchmark::AddCustomContext("pinned_baseline", "cudaMemcpyAsync pinned of " +
                                                     std::to_string(kPinnedBaselineBytes >> 20) +
                                                     " MiB, bytes across the link, median of 15");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  try {
    add_context();
  } catch (const std::exception& e) {  // e.g. bad_alloc: the rows still run and say what fails
    std::fprintf(stderr, "bench_cuda_kernels: context: %s\n", e.what());
  }
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_cuda_kernels: %s: every row reports that error\n",
                 no_device_reason().c_str());
  } else {
    std::printf("baselines: D2D %.1f GB/s (read + write), pinned H2D %.1f GB/s, D2H %.1f GB/s\n",
                g_d2d.gbps, g_h2d.gbps, g_d2h.gbps);
  }
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
