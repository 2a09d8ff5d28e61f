// The GPU side of kvsim_gpu_profile: an OperatorTimer (profile_writer.h) that times cuBLAS bf16
// GEMMs, a byte-streaming kernel and decode attention's paged KV read (device::gather_kv) with
// CUDA events on the current device. CUDA-free header; built only with CUDA.
#pragma once

#include <memory>
#include <string>

#include "kvsim/sim/engine/profile_writer.h"

namespace kvsim {

// The current device's name, or "" when no CUDA device is usable (no driver, no GPU).
std::string cuda_device_name();

// Throws std::runtime_error (file:line and the CUDA or cuBLAS error) when the device, cuBLAS or
// an allocation fails.
std::unique_ptr<OperatorTimer> make_cuda_operator_timer();

}  // namespace kvsim
