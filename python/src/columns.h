// NumPy columns over C++ records, for DataFrames.
//
// field_view: a zero-copy, read-only view of one field of every element of a vector of
// standard-layout structs (a strided column: stride = sizeof(Row)). `owner` keeps the vector
// alive for as long as any view exists. new_column: a fresh array filled from a function (for
// values that need computing, or records that are not standard-layout).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

namespace kvsim::python {

template <typename T>
using ReadOnlyColumn = nanobind::ndarray<nanobind::numpy, const T, nanobind::ndim<1>>;
template <typename T>
using Column = nanobind::ndarray<nanobind::numpy, T, nanobind::ndim<1>>;

// A capsule owning `value` (moved to the heap); deleted when the last array using it goes.
template <typename V>
nanobind::capsule make_owner(V&& value) {
  using Held = std::remove_cvref_t<V>;
  auto* held = new Held(std::forward<V>(value));
  return nanobind::capsule(held, [](void* p) noexcept { delete static_cast<Held*>(p); });
}

// T must be the field's type and `offset` its offsetof within Row.
template <typename T, typename Row>
ReadOnlyColumn<T> field_view(const std::vector<Row>& rows, size_t offset, nanobind::handle owner) {
  static_assert(std::is_standard_layout_v<Row>);
  static_assert(sizeof(Row) % sizeof(T) == 0, "the stride must be a whole number of elements");
  const auto* base = reinterpret_cast<const std::byte*>(rows.data()) + offset;
  const size_t shape[1] = {rows.size()};
  const int64_t strides[1] = {static_cast<int64_t>(sizeof(Row) / sizeof(T))};
  return ReadOnlyColumn<T>(reinterpret_cast<const T*>(base), 1, shape, owner, strides);
}

template <typename T, typename F>
Column<T> new_column(size_t n, F&& value_at) {
  std::unique_ptr<T[]> data(new T[n > 0 ? n : 1]);
  for (size_t i = 0; i < n; ++i) data[i] = value_at(i);
  T* raw = data.release();
  nanobind::capsule owner(raw, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  const size_t shape[1] = {n};
  return Column<T>(raw, 1, shape, owner);
}

}  // namespace kvsim::python
