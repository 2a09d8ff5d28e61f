// One axis of a grid of runs (kvsim sweep's block sizes, kvsim size's cards, ...): the values a
// flag lists, checked, and expanded with "unset" standing for an axis the user did not give; and
// the grid itself, the product of its axes.
#pragma once

#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/core.h>

#include "kvsim/core/param.h"

namespace kvsim {

// Throws std::invalid_argument naming the parameter `id` (core/param.h) when a value is not > 0
// (numbers) or empty (strings), or appears twice.
template <typename T>
void check_grid_axis(const std::vector<T>& values, std::string_view id) {
  const auto flag = [id] { return param(id); };
  std::set<T> seen;
  for (const T& v : values) {
    if constexpr (std::is_arithmetic_v<T>) {
      if (!(v > 0)) {
        throw std::invalid_argument(fmt::format("{}: values must be > 0, got {}", flag(), v));
      }
    } else {
      if (v.empty()) throw std::invalid_argument(fmt::format("{}: empty value", flag()));
    }
    if (!seen.insert(v).second) {
      throw std::invalid_argument(fmt::format("{}: value {} given twice", flag(), v));
    }
  }
}

// The axis's entries for a nested-loop expansion: the values, or one "unset" entry when none.
template <typename T>
std::vector<std::optional<T>> grid_axis_values(const std::vector<T>& values) {
  if (values.empty()) return {std::nullopt};
  return {values.begin(), values.end()};
}

// The Cartesian product of `axes` (each a range, e.g. grid_axis_values(...)): calls fn with one
// entry of each, for every combination, the first axis outermost (grid order: the calls' count
// so far is the point's index).
template <typename Fn, typename Axis, typename... Rest>
void for_each_grid_point(Fn&& fn, const Axis& axis, const Rest&... rest) {
  for (const auto& v : axis) {
    if constexpr (sizeof...(Rest) == 0) {
      fn(v);
    } else {
      for_each_grid_point([&fn, &v](const auto&... tail) { fn(v, tail...); }, rest...);
    }
  }
}

}  // namespace kvsim
