#include "cuda_operator_timer.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvsim/cuda/device_kernels.h"
#include "kvsim/cuda/device_pool.h"
#include "kvsim/cuda/kv_layout.h"

namespace kvsim {
namespace {

void check(cudaError_t e, const char* what, int line) {
  if (e != cudaSuccess) {
    throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(line) + ": " + what +
                             ": " + cudaGetErrorString(e));
  }
}
void check(cublasStatus_t s, const char* what, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(line) + ": " + what +
                             ": cuBLAS status " + std::to_string(static_cast<int>(s)));
  }
}
#define KVSIM_PROFILE_CHECK(call) check((call), #call, __LINE__)

constexpr int kThreads = 256;

// Fills n bf16 values with small deterministic numbers of either sign (|x| < 1/64), so a GEMM
// runs on ordinary data and its fp32 sums stay finite at any k.
__global__ void __launch_bounds__(kThreads) fill_bf16(uint16_t* p, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * kThreads) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u;
    h ^= h >> 15;
    p[i] = static_cast<uint16_t>((h & 0x8000u) | 0x3C00u | (h & 0x7Fu));
  }
}

// Reads nr and writes nw 16-byte vectors (a memory-bound operator's traffic). A read without a
// write feeds a store that never happens, so the load is kept.
__global__ void __launch_bounds__(kThreads)
    stream_bytes(const uint4* __restrict__ src, int64_t nr, uint4* __restrict__ dst, int64_t nw) {
  const int64_t n = nr > nw ? nr : nw;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * kThreads) {
    uint4 v = make_uint4(static_cast<unsigned>(i), 1u, 2u, 3u);
    if (i < nr) v = src[i];
    if (i < nw) {
      dst[i] = make_uint4(v.x ^ 1u, v.y, v.z, v.w);
    } else if (v.x == 0xFFFFFFFFu && v.y == 0x9E3779B9u && v.z == v.w) {
      dst[0] = v;
    }
  }
}

// A device allocation that grows to the largest size asked for.
class Scratch {
 public:
  ~Scratch() {
    if (p_ != nullptr) cudaFree(p_);
  }
  void* get(int64_t bytes) {
    if (bytes > size_) {
      if (p_ != nullptr) KVSIM_PROFILE_CHECK(cudaFree(p_));
      p_ = nullptr;
      size_ = 0;
      check_device_memory_fits(bytes, "kvsim_gpu_profile scratch");
      KVSIM_PROFILE_CHECK(cudaMalloc(&p_, static_cast<size_t>(bytes)));
      size_ = bytes;
      const int64_t n = bytes / 2;
      fill_bf16<<<static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 4096)),
                  kThreads>>>(static_cast<uint16_t*>(p_), n);
      KVSIM_PROFILE_CHECK(cudaGetLastError());
      KVSIM_PROFILE_CHECK(cudaDeviceSynchronize());
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  int64_t size_ = 0;
};

template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) {
    KVSIM_PROFILE_CHECK(cudaMalloc(&p_, std::max<size_t>(1, host.size()) * sizeof(T)));
    KVSIM_PROFILE_CHECK(
        cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  explicit DeviceArray(size_t n) {
    KVSIM_PROFILE_CHECK(cudaMalloc(&p_, std::max<size_t>(1, n) * sizeof(T)));
  }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
};

class CudaOperatorTimer final : public OperatorTimer {
 public:
  CudaOperatorTimer() {
    KVSIM_PROFILE_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    KVSIM_PROFILE_CHECK(cudaEventCreate(&start_));
    KVSIM_PROFILE_CHECK(cudaEventCreate(&stop_));
    KVSIM_PROFILE_CHECK(cublasCreate(&blas_));
    KVSIM_PROFILE_CHECK(cublasSetStream(blas_, stream_));
    int device = 0;
    KVSIM_PROFILE_CHECK(cudaGetDevice(&device));
    KVSIM_PROFILE_CHECK(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device));
  }
  ~CudaOperatorTimer() override {
    cublasDestroy(blas_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }

  // out[m x n] = in[m x k] * W^T with W stored [n x k] (torch.nn.functional.linear's layout:
  // cuBLAS column-major C(n x m) = op_T(W) * in), bf16 in and out, fp32 accumulation.
  std::vector<double> gemm(int64_t m, int64_t n, int64_t k, int32_t warmup,
                           int32_t repetitions) override {
    auto* w = static_cast<char*>(weights_.get(n * k * 2));
    auto* in = static_cast<char*>(inputs_.get(m * k * 2));
    auto* out = static_cast<char*>(outputs_.get(m * n * 2));
    const float alpha = 1, beta = 0;
    return time(warmup, repetitions, [&] {
      KVSIM_PROFILE_CHECK(
          cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                       static_cast<int>(k), &alpha, w, CUDA_R_16BF, static_cast<int>(k), in,
                       CUDA_R_16BF, static_cast<int>(k), &beta, out, CUDA_R_16BF,
                       static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    });
  }

  std::vector<double> memory(int64_t read_bytes, int64_t write_bytes, int32_t warmup,
                             int32_t repetitions) override {
    const int64_t nr = (read_bytes + 15) / 16, nw = (write_bytes + 15) / 16;
    auto* src = static_cast<const uint4*>(inputs_.get(std::max<int64_t>(nr, 1) * 16));
    auto* dst = static_cast<uint4*>(outputs_.get(std::max<int64_t>(nw, 1) * 16));
    const int64_t n = std::max(nr, nw);
    const auto blocks = static_cast<unsigned>(
        std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, int64_t{sms_} * 8));
    return time(warmup, repetitions, [&] {
      stream_bytes<<<blocks, kThreads, 0, stream_>>>(src, nr, dst, nw);
      KVSIM_PROFILE_CHECK(cudaGetLastError());
    });
  }

  // One layer's K and V of `batch` sequences read through shuffled block tables (pages scattered
  // as after a long run), by the backend's gather kernel.
  std::vector<double> decode_attention(const DecodeAttentionShape& s, int32_t warmup,
                                       int32_t repetitions) override {
    const int64_t per_seq = (s.context + s.block_size - 1) / s.block_size;
    KvCacheLayout l;
    l.num_blocks = per_seq * s.batch + 1;  // block 0 is the null block
    l.block_size = s.block_size;
    l.num_layers = 1;
    l.num_kv_heads = s.kv_heads;
    l.head_dim = s.head_dim;
    l.dtype = KvDtype::kBf16;
    DevicePool pool(l);
    std::vector<BlockId> tables(static_cast<size_t>(per_seq * s.batch));
    std::iota(tables.begin(), tables.end(), 1);
    std::shuffle(tables.begin(), tables.end(), std::mt19937(7));
    std::vector<int32_t> offsets(static_cast<size_t>(s.batch) + 1);
    for (int32_t i = 0; i <= s.batch; ++i) {
      offsets[static_cast<size_t>(i)] = static_cast<int32_t>(i * per_seq);
    }
    const std::vector<int32_t> lens(static_cast<size_t>(s.batch), static_cast<int32_t>(s.context));
    const DeviceArray<BlockId> d_tables(tables);
    const DeviceArray<int32_t> d_offsets(offsets);
    const DeviceArray<int32_t> d_lens(lens);
    const DeviceArray<uint64_t> d_sums(static_cast<size_t>(s.batch));
    KVSIM_PROFILE_CHECK(cudaDeviceSynchronize());
    return time(warmup, repetitions, [&] {
      device::gather_kv(l, pool.data(), d_lens.get(), d_offsets.get(), d_tables.get(), s.batch,
                        static_cast<int64_t>(tables.size()), d_sums.get(), stream_);
    });
  }

 private:
  template <class F>
  std::vector<double> time(int32_t warmup, int32_t repetitions, F&& launch) {
    for (int32_t i = 0; i < warmup; ++i) launch();
    KVSIM_PROFILE_CHECK(cudaStreamSynchronize(stream_));
    std::vector<double> ms;
    ms.reserve(static_cast<size_t>(repetitions));
    for (int32_t i = 0; i < repetitions; ++i) {
      KVSIM_PROFILE_CHECK(cudaEventRecord(start_, stream_));
      launch();
      KVSIM_PROFILE_CHECK(cudaEventRecord(stop_, stream_));
      KVSIM_PROFILE_CHECK(cudaEventSynchronize(stop_));
      float t = 0;
      KVSIM_PROFILE_CHECK(cudaEventElapsedTime(&t, start_, stop_));
      ms.push_back(static_cast<double>(t));
    }
    return ms;
  }

  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  int sms_ = 1;
  Scratch weights_, inputs_, outputs_;
};

}  // namespace

std::string cuda_device_name() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return "";
  }
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return "";
  return p.name;
}

std::unique_ptr<OperatorTimer> make_cuda_operator_timer() {
  return std::make_unique<CudaOperatorTimer>();
}

}  // namespace kvsim
