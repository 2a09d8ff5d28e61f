// The Trace handle shared by the trace and run bindings.
#pragma once

#include <memory>

#include "kvsim/sim/traces/trace.h"

namespace kvsim::python {

// An immutable trace, shared by the Python object and any replay running on it.
struct TraceHandle {
  std::shared_ptr<const Trace> trace;
  // The options it was read with (defaults for a trace built from columns), for messages.
  TraceReadOptions options;
};

}  // namespace kvsim::python
