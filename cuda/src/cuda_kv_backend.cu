// CudaKvBackend: the StepBatch executed on the GPU (pool in device memory, vLLM 0.26 layout).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "cuda_check.h"
#include "kvsim/core/param.h"
#include "kvsim/cuda/device_kernels.h"
#include "kvsim/cuda/device_pool.h"
#include "kvsim/cuda/kv_backends.h"
#include "kvsim/cuda/kv_values.h"

namespace kvsim {

namespace {

// write_kv staging is generated for as many layers as fit in this many bytes (>= 1 layer).
constexpr int64_t kDeviceStagingBytes = int64_t{256} << 20;

// A grow-only device buffer.
class DeviceBuffer {
 public:
  ~DeviceBuffer() { cudaFree(ptr_); }
  template <class T>
  T* as(size_t n) {
    const size_t bytes = std::max<size_t>(sizeof(T) * n, 16);
    if (bytes > cap_) {
      KVSIM_CUDA_CHECK(cudaFree(ptr_));
      ptr_ = nullptr;
      KVSIM_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
      cap_ = bytes;
    }
    return static_cast<T*>(ptr_);
  }
  template <class T>
  T* upload(const std::vector<T>& v, cudaStream_t stream) {
    T* d = as<T>(v.size());
    if (!v.empty()) {
      KVSIM_CUDA_CHECK(
          cudaMemcpyAsync(d, v.data(), sizeof(T) * v.size(), cudaMemcpyHostToDevice, stream));
    }
    return d;
  }

 private:
  void* ptr_ = nullptr;
  size_t cap_ = 0;
};

// Sums the elapsed time of (start, stop) event pairs recorded on one stream.
class PhaseTimer {
 public:
  ~PhaseTimer() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  void begin(cudaStream_t s) { KVSIM_CUDA_CHECK(cudaEventRecord(next(), s)); }
  void end(cudaStream_t s) { KVSIM_CUDA_CHECK(cudaEventRecord(next(), s)); }
  // After the stream is synchronised.
  double take_seconds() {
    double total = 0.0;
    for (size_t i = 0; i + 1 < used_; i += 2) {
      float ms = 0.0f;
      KVSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]));
      total += ms * 1e-3;
    }
    used_ = 0;
    return total;
  }

 private:
  cudaEvent_t next() {
    if (used_ == events_.size()) {
      cudaEvent_t e = nullptr;
      KVSIM_CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
    return events_[used_++];
  }
  std::vector<cudaEvent_t> events_;
  size_t used_ = 0;
};

}  // namespace

struct CudaKvBackend::Impl {
  Impl(const KvCacheLayout& layout, int64_t host_swap_slots, std::vector<int32_t> group_num_layers)
      : pool(layout), ledger(layout, host_swap_slots, std::move(group_num_layers)) {
    KVSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    KVSIM_CUDA_CHECK(cudaGetDevice(&device));
    swap_bytes = host_swap_slots * layout.block_bytes_all_layers();
    if (swap_bytes > 0) {
      KVSIM_CUDA_CHECK(cudaMallocHost(&swap_area, static_cast<size_t>(swap_bytes)));
      std::fill_n(swap_area, swap_bytes, kPoisonByte);
    }
    // cuMemcpyBatchAsync (driver >= 12.8, this signature from 13.0) resolved at run time, as
    // vLLM's swap_blocks_batch does; absent => one cudaMemcpyAsync per page.
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuMemcpyBatchAsync", &fn, 13000, cudaEnableDefault, &q) ==
            cudaSuccess &&
        q == cudaDriverEntryPointSuccess) {
      memcpy_batch = reinterpret_cast<PFN_cuMemcpyBatchAsync_v13000>(fn);
    }
    cudaGetLastError();
  }
  ~Impl() {
    cudaFreeHost(swap_area);
    cudaStreamDestroy(stream);
  }

  void swap(std::span<const BlockSwap> swaps, bool to_host) {
    build_swap_copies(pool.layout(), swaps, copies);
    if (copies.empty()) return;
    if (memcpy_batch != nullptr) {
      dsts.clear();
      srcs.clear();
      sizes.clear();
      for (const SwapCopy& c : copies) {
        const auto dev = reinterpret_cast<CUdeviceptr>(pool.data() + c.pool_offset);
        const auto host = reinterpret_cast<CUdeviceptr>(swap_area + c.host_offset);
        dsts.push_back(to_host ? host : dev);
        srcs.push_back(to_host ? dev : host);
        sizes.push_back(static_cast<size_t>(c.bytes));
      }
      CUmemcpyAttributes attr{};
      attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
      CUmemLocation dev_loc{};
      dev_loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
      dev_loc.id = device;
      CUmemLocation host_loc{};
      host_loc.type = CU_MEM_LOCATION_TYPE_HOST;
      attr.srcLocHint = to_host ? dev_loc : host_loc;
      attr.dstLocHint = to_host ? host_loc : dev_loc;
      size_t attr_idx = 0;
      if (memcpy_batch(dsts.data(), srcs.data(), sizes.data(), sizes.size(), &attr, &attr_idx, 1,
                       stream) == CUDA_SUCCESS) {
        return;
      }
      memcpy_batch = nullptr;  // the driver refused: fall back for good
    }
    for (const SwapCopy& c : copies) {
      unsigned char* dev = pool.data() + c.pool_offset;
      unsigned char* host = swap_area + c.host_offset;
      KVSIM_CUDA_CHECK(
          cudaMemcpyAsync(to_host ? host : dev, to_host ? dev : host, static_cast<size_t>(c.bytes),
                          to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, stream));
    }
  }

  DevicePool pool;
  KvLedger ledger;
  cudaStream_t stream = nullptr;
  int device = 0;
  unsigned char* swap_area = nullptr;
  int64_t swap_bytes = 0;
  PFN_cuMemcpyBatchAsync_v13000 memcpy_batch = nullptr;
  std::vector<SwapCopy> copies;
  std::vector<CUdeviceptr> dsts, srcs;
  std::vector<size_t> sizes;
  PhaseTimer timer;
  DeviceBuffer d_slots, d_req, d_pos, d_key, d_value, d_copies, d_lens, d_offsets, d_tables,
      d_checksums, d_verify_req, d_verify_pos, d_verify_group, d_verify_group_layers,
      d_verify_result;
  std::vector<int64_t> token_request;
  std::vector<int32_t> token_position;
  std::vector<int32_t> seq_lens;
  std::vector<int64_t> slots_staging;
  std::vector<int32_t> offsets_staging;
  std::vector<BlockId> tables_staging;
  std::vector<uint64_t> checksums;
  std::vector<uint64_t> group_checksums;
};

CudaKvBackend::CudaKvBackend(const KvCacheLayout& layout, int64_t host_swap_slots,
                             std::vector<int32_t> group_num_layers) {
  if (cuda_device_count() == 0) {
    throw std::runtime_error(
        "the cuda KV backend needs a CUDA device, but the CUDA runtime reports none (use " +
        param("backend", "host") + " for the CPU twin)");
  }
  impl_ = std::make_unique<Impl>(layout, host_swap_slots, std::move(group_num_layers));
}

CudaKvBackend::~CudaKvBackend() = default;

const KvCacheLayout& CudaKvBackend::layout() const {
  return impl_->pool.layout();
}
std::span<const uint64_t> CudaKvBackend::last_read_checksums() const {
  return impl_->checksums;
}
bool CudaKvBackend::uses_batched_memcpy() const {
  return impl_->memcpy_batch != nullptr;
}

StepExecution CudaKvBackend::execute(const StepBatch& batch) {
  Impl& m = *impl_;
  m.ledger.validate(batch);
  const KvCacheLayout& layout = m.pool.layout();
  StepExecution result = step_traffic(layout, batch, m.ledger.group_num_layers());
  cudaStream_t s = m.stream;
  unsigned char* pool = m.pool.data();

  const BlockCopy* d_copies = m.d_copies.upload(batch.copies, s);
  m.timer.begin(s);
  m.swap(batch.swap_out, /*to_host=*/true);
  m.swap(batch.swap_in, /*to_host=*/false);
  device::copy_blocks(layout, pool, d_copies, static_cast<int64_t>(batch.copies.size()), s);
  m.timer.end(s);

  const auto num_tokens = static_cast<int64_t>(group_tables(batch, 0).slot_mapping.size());
  const size_t num_groups = m.ledger.num_groups();
  if (num_tokens > 0) {
    m.ledger.expand_tokens(batch, m.token_request, m.token_position);
    const int64_t* d_req = m.d_req.upload(m.token_request, s);
    const int32_t* d_pos = m.d_pos.upload(m.token_position, s);
    const int64_t layer_stage = num_tokens * layout.num_kv_heads * layout.head_row_bytes();
    const auto chunk = static_cast<int32_t>(
        std::clamp<int64_t>(kDeviceStagingBytes / layer_stage, 1, layout.num_layers));
    auto* key = m.d_key.as<unsigned char>(static_cast<size_t>(chunk * layer_stage));
    auto* value = m.d_value.as<unsigned char>(static_cast<size_t>(chunk * layer_stage));
    // Every group's slot mapping, concatenated, so one upload serves all of them.
    m.slots_staging.clear();
    for (size_t g = 0; g < num_groups; ++g) {
      const GroupTablesView v = group_tables(batch, g);
      m.slots_staging.insert(m.slots_staging.end(), v.slot_mapping.begin(), v.slot_mapping.end());
    }
    const int64_t* d_slots = m.d_slots.upload(m.slots_staging, s);
    for (size_t g = 0; g < num_groups; ++g) {
      const int32_t layers = m.ledger.layers_of_group(g);
      // Group g's tensor j holds seed layer g * num_layers + j (kv_ledger.h).
      const auto seed_base = static_cast<int32_t>(g) * layout.num_layers;
      for (int32_t l0 = 0; l0 < layers; l0 += chunk) {
        const int32_t n = std::min(chunk, layers - l0);
        device::gen_kv(layout, seed_base + l0, n, d_req, d_pos, num_tokens, key, value, s);
        m.timer.begin(s);
        device::write_kv(layout, pool, l0, n, key, value,
                         d_slots + static_cast<int64_t>(g) * num_tokens, num_tokens, s);
        m.timer.end(s);
      }
    }
  }
  const size_t reads = batch.reads.size();
  m.checksums.assign(reads, 0);
  m.group_checksums.assign(num_groups * reads, 0);
  if (reads > 0) {
    m.seq_lens.resize(reads);
    std::transform(batch.reads.begin(), batch.reads.end(), m.seq_lens.begin(),
                   [](const SequenceRead& r) { return r.seq_len; });
    const int32_t* d_lens = m.d_lens.upload(m.seq_lens, s);
    auto* d_sums = m.d_checksums.as<uint64_t>(num_groups * reads);
    // Every group's tables, concatenated (offsets stay relative to the group's own tables).
    m.offsets_staging.clear();
    m.tables_staging.clear();
    for (size_t g = 0; g < num_groups; ++g) {
      const GroupTablesView v = group_tables(batch, g);
      m.offsets_staging.insert(m.offsets_staging.end(), v.block_table_offsets.begin(),
                               v.block_table_offsets.end());
      m.tables_staging.insert(m.tables_staging.end(), v.block_tables.begin(), v.block_tables.end());
    }
    const int32_t* d_offsets = m.d_offsets.upload(m.offsets_staging, s);
    const BlockId* d_tables = m.d_tables.upload(m.tables_staging, s);
    size_t at = 0;
    for (size_t g = 0; g < num_groups; ++g) {
      const GroupTablesView v = group_tables(batch, g);
      KvCacheLayout group_layout = layout;  // the group's first n_g tensors
      group_layout.num_layers = m.ledger.layers_of_group(g);
      m.timer.begin(s);
      device::gather_kv(group_layout, pool, d_lens, d_offsets + g * (reads + 1), d_tables + at,
                        static_cast<int32_t>(reads), static_cast<int64_t>(v.block_tables.size()),
                        d_sums + g * reads, s);
      m.timer.end(s);
      at += v.block_tables.size();
    }
    KVSIM_CUDA_CHECK(cudaMemcpyAsync(m.group_checksums.data(), d_sums,
                                     sizeof(uint64_t) * m.group_checksums.size(),
                                     cudaMemcpyDeviceToHost, s));
  }
  KVSIM_CUDA_CHECK(cudaStreamSynchronize(s));
  for (size_t g = 0; g < num_groups; ++g) {
    for (size_t r = 0; r < reads; ++r) m.checksums[r] += m.group_checksums[g * reads + r];
  }
  result.device_seconds = m.timer.take_seconds();
  m.ledger.apply(batch);
  return result;
}

BackendVerification CudaKvBackend::verify() {
  Impl& m = *impl_;
  const int64_t* d_req = m.d_verify_req.upload(m.ledger.slot_request(), m.stream);
  const int32_t* d_pos = m.d_verify_pos.upload(m.ledger.slot_position(), m.stream);
  const bool grouped = m.ledger.grouped();
  const int32_t* d_group =
      grouped ? m.d_verify_group.upload(m.ledger.slot_group(), m.stream) : nullptr;
  const int32_t* d_group_layers =
      grouped ? m.d_verify_group_layers.upload(m.ledger.group_num_layers(), m.stream) : nullptr;
  auto* d_result = m.d_verify_result.as<int64_t>(2);
  device::verify_slots(m.pool.layout(), m.pool.data(), d_req, d_pos, d_result, m.stream, d_group,
                       d_group_layers);
  int64_t result[2] = {0, 0};
  KVSIM_CUDA_CHECK(cudaMemcpy(result, d_result, sizeof result, cudaMemcpyDeviceToHost));
  return make_verification(m.pool.layout(), m.ledger, result[0], result[1]);
}

}  // namespace kvsim
