#include "kvsim/run/grid_values.h"

#include <limits>
#include <stdexcept>

#include <fmt/core.h>

#include "kvsim/core/param.h"

namespace kvsim::run {

std::vector<int32_t> to_int32_values(std::string_view param_id,
                                     const std::vector<int64_t>& values) {
  std::vector<int32_t> out;
  out.reserve(values.size());
  for (int64_t x : values) {
    if (x > std::numeric_limits<int32_t>::max() || x < std::numeric_limits<int32_t>::min()) {
      throw std::invalid_argument(fmt::format("{}: {} is too large", param(param_id), x));
    }
    out.push_back(static_cast<int32_t>(x));
  }
  return out;
}

}  // namespace kvsim::run
