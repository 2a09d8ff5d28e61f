// kvsim.calibrate: the run room's run_calibration (kvsim/run/calibrate_job.h) with the keywords
// converted as for replay; returns the calibration and the error tables as JSON text for the Python
// layer.
#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "interruptible.h"
#include "kvsim/run/calibrate_job.h"
#include "options.h"

namespace nb = nanobind;

namespace kvsim::python {
namespace {

struct CalibrateKwargs {
  nb::dict d;
  template <typename T>
  void take(const char* key, T& out) {
    if (d.contains(key)) {
      out = nb::cast<T>(d[key]);
      nb::del(d[key]);
    }
  }
};

// (calibration JSON text, fit errors JSON text, cross-validation errors JSON text)
nb::tuple calibrate(const std::vector<std::string>& measured, nb::dict plan_kwargs,
                    nb::dict sched_kwargs, nb::dict calibrate_kwargs) {
  run::CalibrateJob job;
  job.measured = measured;
  job.plan = plan_options_from(plan_kwargs);
  job.sched = scheduler_options_from(sched_kwargs);
  CalibrateKwargs k{calibrate_kwargs};
  std::optional<int32_t> tokens, seqs;
  k.take("max_num_batched_tokens", tokens);
  k.take("max_num_seqs", seqs);
  job.max_num_batched_tokens = tokens;
  job.max_num_seqs = seqs;
  k.take("fit", job.fit);
  k.take("start", job.start);
  k.take("max_evaluations", job.max_evaluations);
  k.take("cross_validation", job.cross_validate);
  k.take("measured_vllm_version", job.measured_vllm_version);
  if (nb::len(k.d) != 0) {  // a key the Python layer passes and nothing consumes: its bug
    throw nb::type_error(
        ("calibrate(): unexpected options " + nb::cast<std::string>(nb::str(k.d))).c_str());
  }
  std::atomic<bool> stop{false};
  job.progress = [&stop](int32_t, double) {
    if (stop.load()) throw Cancelled();
  };
  const run::CalibrateOutcome out =
      run_interruptible([&job] { return run::run_calibration(job); }, stop);
  return nb::make_tuple(out.calibration.dump(2), out.fit_errors.dump(), out.cv_errors.dump());
}

}  // namespace

void register_calibrate(nb::module_& m) {
  m.def("calibrate", &calibrate, nb::arg("measured"), nb::arg("plan_options"),
        nb::arg("scheduler_options"), nb::arg("calibrate_options"),
        "`kvsim calibrate`: (calibration JSON text, fit errors JSON, cross-validation errors "
        "JSON). Runs without the GIL; Ctrl-C raises KeyboardInterrupt.");
}

}  // namespace kvsim::python
