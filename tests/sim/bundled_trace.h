#pragma once
// The path of a trace bundled in the repository's traces/ folder.
#include <string>

namespace kvsim {

inline std::string bundled(const std::string& name) {
  return std::string(KVSIM_SOURCE_DIR) + "/traces/" + name;
}

}  // namespace kvsim
