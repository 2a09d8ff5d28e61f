// The values of a grid axis (sweep's and size's comma-separated lists), as the front ends hand
// them over: 64-bit integers, narrowed here to the 32-bit settings they become.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace kvsim::run {

// `values` as int32_t. Throws std::invalid_argument "<param>: X is too large" (param_id named
// with core/param.h) for a value outside the 32-bit range.
std::vector<int32_t> to_int32_values(std::string_view param_id, const std::vector<int64_t>& values);

}  // namespace kvsim::run
