#pragma once
// The operation count of a random-operation property test: `base`, or KVSIM_PROPERTY_OPS when
// set (the asan preset lowers it; a soak run raises it). Never below 1.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace kvsim {

inline int64_t scaled_ops(int64_t base) {
  if (const char* s = std::getenv("KVSIM_PROPERTY_OPS")) return std::max<int64_t>(1, std::atoll(s));
  return base;
}

}  // namespace kvsim
