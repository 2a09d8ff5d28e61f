// KVSIM_CUDA_CHECK: every CUDA runtime call goes through it; a failure throws std::runtime_error
// "file:line: call: cudaGetErrorString" (libraries never exit()).
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace kvsim::detail {

inline void cuda_check(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + ": " +
                             cudaGetErrorString(err));
  }
}

}  // namespace kvsim::detail

#define KVSIM_CUDA_CHECK(call) ::kvsim::detail::cuda_check((call), #call, __FILE__, __LINE__)
// After a kernel launch: launch-configuration errors surface here, not at the next sync.
#define KVSIM_CUDA_CHECK_LAUNCH() KVSIM_CUDA_CHECK(cudaGetLastError())
