// KvBackend: where a step's KV reads and writes physically happen.
//
// sim hands each StepBatch to a backend; implementations: NullKvBackend (metadata only, the
// default), the host twin and the CUDA device backend (cuda/). A backend must process batches in
// order and may keep state across steps (the KV pool itself).
#pragma once

#include <cstdint>
#include <string>

#include "kvsim/core/step_batch.h"

namespace kvsim {

struct StepExecution {
  double device_seconds = 0.0;  // measured time of the step's KV work (0 for the null backend)
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
};

struct BackendVerification {
  bool ok = true;
  int64_t slots_checked = 0;
  std::string detail;  // first mismatch, or a summary
};

class KvBackend {
 public:
  virtual ~KvBackend() = default;
  virtual const char* name() const = 0;
  virtual StepExecution execute(const StepBatch& batch) = 0;
  // Checks the pool content against what the writes so far must have produced.
  virtual BackendVerification verify() { return {}; }
};

// Does nothing: the replay measures allocator/scheduler behaviour only.
class NullKvBackend final : public KvBackend {
 public:
  const char* name() const override { return "null"; }
  StepExecution execute(const StepBatch&) override { return {}; }
};

}  // namespace kvsim
