#pragma once
// Shared by the step-time model tests: a decode-only step and the bundled Vidur tables' paths.
#include <cstdint>
#include <string>

#include "kvsim/sim/engine/step_time_model.h"

namespace kvsim {

// `batch` decoding sequences, each with `context` tokens already cached.
inline StepWork decode_batch(int batch, int64_t context) {
  StepWork w;
  for (int i = 0; i < batch; ++i) w.add_sequence(context, 1, false);
  return w;
}

inline const std::string kSource = KVSIM_SOURCE_DIR;
inline const std::string kH100Dgx = kSource + "/calibration/vidur/network/h100_dgx/all_reduce.csv";

}  // namespace kvsim
