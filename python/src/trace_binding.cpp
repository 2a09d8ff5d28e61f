// Traces: read_trace (the CLI's reader, every format), traces built from NumPy columns, and the
// trace's columns as NumPy arrays.
#include "trace_binding.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "columns.h"
#include "kvsim/run/trace_input.h"
#include "options.h"

namespace nb = nanobind;

namespace kvsim::python {
namespace {

template <typename T>
using In = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// A trace from columns: row i becomes source line i + 1 of `name`; rows are sorted by arrival
// (stable) and arrivals rebased to the first, as read_trace() does for files.
TraceHandle trace_from_arrays(
    const std::string& name, In<double> arrival_s, In<int64_t> input, In<int64_t> output,
    std::optional<In<int64_t>> priority, std::optional<std::vector<std::string>> session_id,
    std::optional<std::vector<std::optional<std::vector<uint64_t>>>> hash_ids,
    int32_t hash_block_size) {
  const size_t n = arrival_s.shape(0);
  const auto same_length = [&](size_t m, const char* field) {
    if (m != n) {
      throw std::invalid_argument(
          fmt::format("{}: column '{}' has {} rows, arrival_s has {}", name, field, m, n));
    }
  };
  same_length(input.shape(0), "input_tokens");
  same_length(output.shape(0), "output_tokens");
  if (priority) same_length(priority->shape(0), "priority");
  if (session_id) same_length(session_id->size(), "session_id");
  if (hash_ids) {
    same_length(hash_ids->size(), "hash_ids");
    if (hash_block_size <= 0) {
      throw std::invalid_argument(
          fmt::format("{}: hash_ids need hash_block_size > 0 (tokens per hash id), got {}", name,
                      hash_block_size));
    }
  }
  auto trace = std::make_shared<Trace>();
  trace->path = name;
  trace->format = TraceFormat::KVSIM;
  trace->arrival_mode = ArrivalMode::TRACE;
  trace->rows_read = static_cast<int64_t>(n);
  trace->requests.reserve(n);
  const auto tokens = [&](int64_t v, int64_t line, const char* field) {
    if (v < 0) throw TraceError(name, line, field, "negative token count", std::to_string(v));
    if (v > std::numeric_limits<int32_t>::max()) {
      throw TraceError(name, line, field, "token count above 2^31 - 1", std::to_string(v));
    }
    return static_cast<int32_t>(v);
  };
  for (size_t i = 0; i < n; ++i) {
    const auto line = static_cast<int64_t>(i) + 1;
    TraceRequest r;
    r.source_line = line;
    const double s = arrival_s(i);
    // 9.2e9 s keeps s * 1e9 within int64; the span check against kMaxArrivalNs follows below.
    if (!std::isfinite(s) || s < 0 || s > 9.2e9) {
      throw TraceError(name, line, "arrival_s", "not a finite number of seconds >= 0",
                       fmt::format("{}", s));
    }
    r.arrival_ns = std::llround(s * 1e9);
    r.input_tokens = tokens(input(i), line, "input_tokens");
    r.output_tokens = tokens(output(i), line, "output_tokens");
    if (priority) {
      const int64_t p = (*priority)(i);
      if (p < std::numeric_limits<int32_t>::min() || p > std::numeric_limits<int32_t>::max()) {
        throw TraceError(name, line, "priority", "outside the 32-bit integer range",
                         std::to_string(p));
      }
      r.priority = static_cast<int32_t>(p);
    }
    if (session_id) r.session_id = (*session_id)[i];
    if (hash_ids && (*hash_ids)[i]) {
      const std::vector<uint64_t>& ids = *(*hash_ids)[i];
      const int64_t expected = (int64_t{r.input_tokens} + hash_block_size - 1) / hash_block_size;
      if (static_cast<int64_t>(ids.size()) != expected) {
        throw TraceError(name, line, "hash_ids",
                         fmt::format("expected ceil({}/{}) = {} ids for a hash block size of {}",
                                     r.input_tokens, hash_block_size, expected, hash_block_size),
                         fmt::format("{} ids", ids.size()));
      }
      r.hash_ids = std::make_shared<const std::vector<uint64_t>>(ids);
      r.hash_block_size = hash_block_size;
    }
    trace->requests.push_back(std::move(r));
  }
  std::stable_sort(
      trace->requests.begin(), trace->requests.end(),
      [](const TraceRequest& a, const TraceRequest& b) { return a.arrival_ns < b.arrival_ns; });
  if (!trace->requests.empty()) {
    const int64_t base = trace->requests.front().arrival_ns;
    for (TraceRequest& r : trace->requests) {
      r.arrival_ns -= base;
      if (r.arrival_ns > kMaxArrivalNs) {
        throw TraceError(name, r.source_line, "arrival_s",
                         "arrival more than 2^62 ns (about 146 years) after the first request",
                         fmt::format("{} ns", r.arrival_ns));
      }
    }
  }
  return TraceHandle{std::move(trace), {}};
}

nb::dict trace_columns(const TraceHandle& h) {
  const std::vector<TraceRequest>& reqs = h.trace->requests;
  const size_t n = reqs.size();
  nb::dict d;
  d["arrival_ns"] = new_column<int64_t>(n, [&](size_t i) { return reqs[i].arrival_ns; });
  d["input_tokens"] = new_column<int32_t>(n, [&](size_t i) { return reqs[i].input_tokens; });
  d["output_tokens"] = new_column<int32_t>(n, [&](size_t i) { return reqs[i].output_tokens; });
  d["priority"] = new_column<int32_t>(n, [&](size_t i) { return reqs[i].priority; });
  d["hash_block_size"] = new_column<int32_t>(n, [&](size_t i) { return reqs[i].hash_block_size; });
  d["source_line"] = new_column<int64_t>(n, [&](size_t i) { return reqs[i].source_line; });
  return d;
}

const TraceRequest& at(const TraceHandle& h, int64_t i) {
  const auto n = static_cast<int64_t>(h.trace->requests.size());
  if (i < 0 || i >= n) throw nb::index_error(fmt::format("request {} of {}", i, n).c_str());
  return h.trace->requests[static_cast<size_t>(i)];
}

}  // namespace

void register_trace(nb::module_& m) {
  nb::class_<TraceHandle>(m, "_Trace", "An immutable trace held in C++ (see kvsim.Trace).")
      .def("__len__", [](const TraceHandle& h) { return h.trace->requests.size(); })
      .def_prop_ro(
          "path", [](const TraceHandle& h) { return h.trace->path; },
          "The file read, or the name given to a trace built from columns.")
      .def_prop_ro(
          "format", [](const TraceHandle& h) { return std::string(to_string(h.trace->format)); },
          "The layout actually read (azure, vidur, ..., kvsim).")
      .def_prop_ro(
          "arrival_mode",
          [](const TraceHandle& h) { return std::string(to_string(h.trace->arrival_mode)); },
          "How arrivals were assigned: trace, all-at-once or poisson.")
      .def_prop_ro(
          "rows_read", [](const TraceHandle& h) { return h.trace->rows_read; },
          "Data rows seen in the file (header excluded).")
      .def_prop_ro(
          "dropped", [](const TraceHandle& h) { return h.trace->dropped; },
          "Rows not turned into requests, by reason.")
      .def_prop_ro(
          "bad_row_examples", [](const TraceHandle& h) { return h.trace->bad_row_examples; },
          "The first skipped-row messages (skip_bad_rows=True).")
      .def("columns", &trace_columns,
           "Per-request columns as NumPy arrays: arrival_ns, input_tokens, output_tokens, "
           "priority, hash_block_size, source_line.")
      .def(
          "session_ids",
          [](const TraceHandle& h) -> std::optional<std::vector<std::string>> {
            const auto& reqs = h.trace->requests;
            if (std::all_of(reqs.begin(), reqs.end(),
                            [](const TraceRequest& r) { return r.session_id.empty(); })) {
              return std::nullopt;
            }
            std::vector<std::string> out;
            out.reserve(reqs.size());
            for (const TraceRequest& r : reqs) out.push_back(r.session_id);
            return out;
          },
          "Every request's session id, or None when the trace has none.")
      .def(
          "has_hash_ids",
          [](const TraceHandle& h) {
            return std::any_of(h.trace->requests.begin(), h.trace->requests.end(),
                               [](const TraceRequest& r) { return r.hash_ids != nullptr; });
          },
          "Whether any request carries prefix hash ids.")
      .def(
          "hash_ids",
          [](const TraceHandle& h, int64_t i) -> std::optional<std::vector<uint64_t>> {
            const TraceRequest& r = at(h, i);
            if (!r.hash_ids) return std::nullopt;
            return *r.hash_ids;
          },
          nb::arg("index"), "Request `index`'s prefix hash ids, or None.")
      .def(
          "prompt_token_ids",
          [](const TraceHandle& h, int64_t i) -> std::optional<std::vector<int32_t>> {
            const TraceRequest& r = at(h, i);
            if (!r.prompt_token_ids) return std::nullopt;
            return *r.prompt_token_ids;
          },
          nb::arg("index"), "Request `index`'s prompt token ids, or None.");

  m.def(
      "read_trace",
      [](const std::string& path, nb::dict options) {
        const TraceReadOptions o = trace_options_from(options);
        run::TraceSettingsGiven given;
        given.rate = options.contains("rate");
        given.seed = options.contains("seed");
        run::check_trace_settings(o, given);
        nb::gil_scoped_release release;
        return TraceHandle{std::make_shared<const Trace>(read_trace(path, o)), o};
      },
      nb::arg("path"), nb::arg("options"),
      "Reads a trace file with the CLI's reader (options: the trace flags' names).");
  m.def("trace_from_arrays", &trace_from_arrays, nb::arg("name"), nb::arg("arrival_s"),
        nb::arg("input_tokens"), nb::arg("output_tokens"), nb::arg("priority").none(),
        nb::arg("session_id").none(), nb::arg("hash_ids").none(), nb::arg("hash_block_size"),
        "Builds a trace from columns; errors name `name`, the row (1-based) and the column.");
}

}  // namespace kvsim::python
