#include "options.h"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include <fmt/core.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "kvsim/run/parameters.h"

namespace nb = nanobind;

namespace kvsim::python {
namespace {

// Takes keys out of a copy of the dict; finish() refuses what is left.
class Kwargs {
 public:
  Kwargs(nb::dict d, const char* what) : what_(what) {
    PyObject* copy = PyDict_Copy(d.ptr());
    if (copy == nullptr) throw nb::python_error();
    d_ = nb::steal<nb::dict>(copy);
  }

  template <typename T>
  void take(const char* key, T& into) {
    if (!d_.contains(key)) return;
    if constexpr (std::is_same_v<T, TraceFormat>) {
      into = parse_trace_format(cast<std::string>(key, d_[key]));
    } else if constexpr (std::is_same_v<T, ArrivalMode>) {
      into = parse_arrival_mode(cast<std::string>(key, d_[key]));
    } else {
      into = cast<T>(key, d_[key]);
    }
    nb::del(d_[key]);
  }
  template <typename T>
  void take(const char* key, std::optional<T>& into) {
    if (!d_.contains(key)) return;
    nb::handle v = d_[key];
    if (!v.is_none()) into = cast<T>(key, v);
    nb::del(d_[key]);
  }

  // The Python layer checked the type, so a failed cast is an integer outside the field's
  // range (an int32 setting given 2**40): a ValueError naming the keyword, never std::bad_cast.
  template <typename T>
  static T cast(const char* key, nb::handle v) {
    try {
      return nb::cast<T>(v);
    } catch (const std::bad_cast&) {
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        throw nb::value_error(fmt::format("{} is out of range (expected {} .. {}; got {})", key,
                                          std::numeric_limits<T>::min(),
                                          std::numeric_limits<T>::max(),
                                          nb::cast<std::string>(nb::repr(v)))
                                  .c_str());
      }
      throw nb::type_error(
          fmt::format("{}: unexpected type {}", key, nb::cast<std::string>(nb::repr(v.type())))
              .c_str());
    }
  }

  void finish() const {
    for (auto [key, value] : d_) {
      (void)value;
      throw nb::type_error(
          (std::string(what_) + ": unexpected option '" + nb::cast<std::string>(nb::str(key)) + "'")
              .c_str());
    }
  }

 private:
  nb::dict d_;
  const char* what_;
};

}  // namespace

run::PlanOptions plan_options_from(nb::dict kwargs) {
  Kwargs k(kwargs, "model/card options");
  run::PlanOptions o;
  run::visit_plan_params(o, [&k](const run::Param& p, auto& field) { k.take(p.id, field); });
  k.finish();
  return o;
}

run::SchedulerOptions scheduler_options_from(nb::dict kwargs) {
  Kwargs k(kwargs, "scheduler options");
  run::SchedulerOptions o;
  run::visit_scheduler_params(o, [&k](const run::Param& p, auto& field) { k.take(p.id, field); });
  k.finish();
  return o;
}

TraceReadOptions trace_options_from(nb::dict kwargs) {
  Kwargs k(kwargs, "trace options");
  TraceReadOptions o;
  run::visit_trace_params(o, [&k](const run::Param& p, auto& field) { k.take(p.id, field); });
  k.finish();
  return o;
}

void take_replay_options(nb::dict kwargs, run::ReplayOptions& o) {
  Kwargs k(kwargs, "replay options");
  run::visit_replay_params(o, [&k](const run::Param& p, auto& field) { k.take(p.id, field); });
  k.finish();
}

run::ClusterOptions cluster_options_from(nb::dict kwargs) {
  Kwargs k(kwargs, "cluster options");
  run::ClusterOptions o;
  run::visit_cluster_params(o, [&k](const run::Param& p, auto& field) { k.take(p.id, field); });
  k.finish();
  return o;
}

namespace {

// The Python kind of a field: what _options.py checks a keyword's value against.
template <typename T>
const char* kind_of() {
  if constexpr (std::is_same_v<T, bool>) {
    return "bool";
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    return "uint64";
  } else if constexpr (std::is_integral_v<T>) {
    return "int";
  } else if constexpr (std::is_floating_point_v<T>) {
    return "float";
  } else {
    static_assert(std::is_same_v<T, std::string> || std::is_enum_v<T>, "a setting of another type");
    return "str";  // an enum is given by name
  }
}
template <typename T>
const char* kind_of(const std::optional<T>*) {
  return kind_of<T>();
}
template <typename T>
const char* kind_of(const T*) {
  return kind_of<T>();
}

const char* rule_name(run::ValueRule r) {
  switch (r) {
    case run::ValueRule::kAny:
      return "any";
    case run::ValueRule::kPositive:
      return "positive";
    case run::ValueRule::kNonNegative:
      return "non_negative";
    case run::ValueRule::kFractionBelowOne:
      return "fraction_below_one";
    case run::ValueRule::kPath:
      return "path";
  }
  return "any";
}

}  // namespace

nb::dict parameter_table(const std::vector<std::string>& router_names) {
  nb::dict table;
  const auto add = [&table, &router_names](const char* group) {
    return [&table, &router_names, group](const run::Param& p, const auto& field) {
      nb::list choices;
      for (std::string_view c : p.choices) choices.append(nb::str(c.data(), c.size()));
      if (std::string_view(p.id) == "router") {
        for (const std::string& name : router_names) choices.append(nb::str(name.c_str()));
      }
      const char* kind = p.rule == run::ValueRule::kPath ? "path" : kind_of(&field);
      table[p.id] = nb::make_tuple(group, kind, rule_name(p.rule), nb::tuple(choices));
    };
  };
  const run::ReplayOptions replay;
  run::visit_plan_params(replay.plan, add("plan"));
  run::visit_scheduler_params(replay.sched, add("scheduler"));
  run::visit_replay_params(replay, add("replay"));
  const run::ClusterOptions cluster;
  run::visit_cluster_params(cluster, add("cluster"));
  const TraceReadOptions trace;
  run::visit_trace_params(trace, add("trace"));
  return table;
}

}  // namespace kvsim::python
