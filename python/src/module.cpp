// kvsim._kvsim: the compiled half of the kvsim Python package (docs/python.md). The public API is
// kvsim/__init__.py; this module is its engine room and is not meant to be imported directly.
//
// Errors: every C++ exception reaches Python with the one-line message the CLI prints after
// "kvsim: error: ", its parameters spelled as keywords (block_size= where the CLI says
// --block-size; core/param.h). The Python types are nanobind's: std::invalid_argument,
// domain_error, length_error and range_error are ValueError, out_of_range IndexError,
// overflow_error OverflowError, any other std::exception RuntimeError (bad_alloc stays
// nanobind's MemoryError); two kvsim errors get their own classes (both ValueError subclasses,
// because both mean "this input cannot be used"): TraceError (malformed trace: .path, .line,
// .field) and DoesNotFitError (the model's KV cache cannot hold one request on this card).
#include <nanobind/nanobind.h>

#include <new>
#include <stdexcept>
#include <string>

#include "bindings.h"
#include "kvsim/core/param.h"
#include "kvsim/core/planner.h"
#include "kvsim/sim/traces/trace.h"

namespace nb = nanobind;

namespace kvsim::python {
namespace {

// Owned by the module (created once at import).
PyObject* g_trace_error = nullptr;
PyObject* g_does_not_fit_error = nullptr;

// The message as Python shows it: parameters spelled as keywords.
std::string python_message(const std::exception& e) {
  return spell_params(e.what(), ParamSpelling::kPython);
}

void set_error(PyObject* cls, const std::exception& e) {
  PyErr_SetString(cls, python_message(e).c_str());
}

// Raises `cls(message)` with extra attributes.
void raise_with_attrs(PyObject* cls, const char* message, nb::dict attrs) {
  nb::object exc = nb::steal(PyObject_CallFunction(cls, "s", message));
  if (!exc.is_valid()) return;  // the call's own error stays set
  for (auto [key, value] : attrs) nb::setattr(exc, key, value);
  PyErr_SetObject(cls, exc.ptr());
}

}  // namespace

void register_errors(nb::module_& m) {
  g_trace_error = PyErr_NewExceptionWithDoc(
      "kvsim._kvsim.TraceError",
      "A malformed trace. str() is one line 'FILE:LINE: field 'NAME': problem (got 'VALUE')'; "
      "the attributes path, line and field say where.",
      PyExc_ValueError, nullptr);
  g_does_not_fit_error = PyErr_NewExceptionWithDoc(
      "kvsim._kvsim.DoesNotFitError",
      "The configuration is valid, but the KV cache cannot hold one max_model_len request (or "
      "the KV budget is not positive): vLLM would refuse to start.",
      PyExc_ValueError, nullptr);
  if (g_trace_error == nullptr || g_does_not_fit_error == nullptr) throw nb::python_error();
  m.attr("TraceError") = nb::handle(g_trace_error);
  m.attr("DoesNotFitError") = nb::handle(g_does_not_fit_error);

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const TraceError& e) {
      nb::dict attrs;
      attrs["path"] = nb::str(e.path().c_str());
      attrs["line"] = nb::int_(e.line());
      attrs["field"] = nb::str(e.field().c_str());
      raise_with_attrs(g_trace_error, python_message(e).c_str(), attrs);
    } catch (const DoesNotFitError& e) {
      set_error(g_does_not_fit_error, e);
    } catch (const nb::builtin_exception&) {
      throw;  // nanobind's own (never reach a translator today): left to nanobind
    } catch (const nb::python_error&) {
      throw;
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::domain_error& e) {
      set_error(PyExc_ValueError, e);
    } catch (const std::invalid_argument& e) {
      set_error(PyExc_ValueError, e);
    } catch (const std::length_error& e) {
      set_error(PyExc_ValueError, e);
    } catch (const std::out_of_range& e) {
      set_error(PyExc_IndexError, e);
    } catch (const std::range_error& e) {
      set_error(PyExc_ValueError, e);
    } catch (const std::overflow_error& e) {
      set_error(PyExc_OverflowError, e);
    } catch (const std::exception& e) {
      set_error(PyExc_RuntimeError, e);
    }
  });
}

}  // namespace kvsim::python

NB_MODULE(_kvsim, m) {
  m.doc() =
      "kvsim's compiled engine (vLLM 0.26 KV-cache allocator and v1 scheduler clone). Use the "
      "kvsim package, not this module.";
  namespace py = kvsim::python;
  // Errors first: the other parts' functions raise them.
  for (void (*part)(nanobind::module_&) :
       {py::register_errors, py::register_trace, py::register_runs, py::register_sweep,
        py::register_size, py::register_allocator}) {
    part(m);
  }
#ifdef KVSIM_HAVE_CALIBRATE
  py::register_calibrate(m);
#endif
}
