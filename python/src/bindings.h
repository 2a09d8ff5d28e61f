// The parts of the kvsim._kvsim extension, each registered on the module by module.cpp.
#pragma once

#include <nanobind/nanobind.h>

namespace kvsim::python {

void register_errors(nanobind::module_& m);     // module.cpp
void register_trace(nanobind::module_& m);      // trace_binding.cpp
void register_runs(nanobind::module_& m);       // run_binding.cpp: plan, replay
void register_sweep(nanobind::module_& m);      // sweep_binding.cpp: sweep
void register_size(nanobind::module_& m);       // size_binding.cpp: size
void register_allocator(nanobind::module_& m);  // allocator_binding.cpp
void register_calibrate(nanobind::module_& m);  // calibrate_binding.cpp (builds with NLopt)

}  // namespace kvsim::python
