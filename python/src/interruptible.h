// Long C++ work (a replay, a sweep) without the GIL, stoppable by Ctrl-C.
//
// The work runs on a worker thread; the calling (Python) thread waits without the GIL and every
// 50 ms takes it back just long enough to run Python's pending signal handlers
// (PyErr_CheckSignals: Ctrl-C raises KeyboardInterrupt there). When a handler raises, `stop`
// is set, the work is expected to notice it (the replay's progress callback, the sweep runner
// before each point) and throw, the worker is joined, and the handler's exception is raised in
// Python. Only the main thread runs signal handlers, as in any Python code.
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include <nanobind/nanobind.h>

namespace kvsim::python {

// Thrown inside the work when `stop` is set; never reaches Python.
struct Cancelled : std::runtime_error {
  Cancelled() : std::runtime_error("cancelled by a Python signal handler") {}
};

template <typename F>
auto run_interruptible(F&& work, std::atomic<bool>& stop) -> decltype(work()) {
  using R = decltype(work());
  std::packaged_task<R()> task(std::forward<F>(work));
  std::future<R> result = task.get_future();
  std::optional<nanobind::python_error> raised;
  {
    nanobind::gil_scoped_release release;
    std::thread worker(std::move(task));
    while (result.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
      nanobind::gil_scoped_acquire acquire;
      if (PyErr_CheckSignals() != 0) {
        raised.emplace();  // fetches the handler's exception (KeyboardInterrupt)
        stop.store(true);
        break;
      }
    }
    worker.join();
  }
  if (raised) throw *raised;
  return result.get();
}

}  // namespace kvsim::python
