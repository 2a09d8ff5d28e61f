// KVSIM_HD marks functions compiled for both the CPU and the GPU.
//
// The kernel logic of the cuda room lives in headers as KVSIM_HD inline functions so that the very
// same code runs in the CUDA kernels (nvcc) and in the host twin (g++ with Thrust's CPP system).
// Under a plain C++ compiler the macro expands to nothing.
// Internal (detail/): included by the cuda room's headers, kernels and host twin only.
#pragma once

#if defined(__CUDACC__)
#define KVSIM_HD __host__ __device__
#else
#define KVSIM_HD
#endif
