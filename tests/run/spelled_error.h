// The message of the std::invalid_argument a call throws, in one front end's spelling: what the
// run room's tests compare with (each rule is checked as the CLI and as Python word it).
#pragma once

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "kvsim/core/param.h"

namespace kvsim::run {

template <typename F>
std::string error(F&& f, ParamSpelling spelling) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return spell_params(e.what(), spelling);
  }
  ADD_FAILURE() << "no error";
  return "";
}

}  // namespace kvsim::run
