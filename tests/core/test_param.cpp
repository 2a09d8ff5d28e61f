// Parameter markers in error messages (param.h): each front end's spelling.
#include "kvsim/core/param.h"

#include <gtest/gtest.h>

namespace kvsim {
namespace {

TEST(Param, SpellsANameForEachFrontEnd) {
  const std::string msg = param("block_sizes") + ": item 1 of ',16' is empty";
  EXPECT_EQ(spell_params(msg, ParamSpelling::kCli), "--block-sizes: item 1 of ',16' is empty");
  EXPECT_EQ(spell_params(msg, ParamSpelling::kPython), "block_sizes=: item 1 of ',16' is empty");
  EXPECT_EQ(spell_params(msg, ParamSpelling::kNeutral), "block_sizes: item 1 of ',16' is empty");
}

TEST(Param, SpellsAValueAndABooleanFlag) {
  const std::string msg = "context: " + param("step_time", "'x'") + " needs " +
                          param_flag("disable_hybrid_kv_cache_manager", false) + " and " +
                          param_flag("async_scheduling", true);
  EXPECT_EQ(spell_params(msg, ParamSpelling::kCli),
            "context: --step-time 'x' needs --no-disable-hybrid-kv-cache-manager and "
            "--async-scheduling");
  EXPECT_EQ(spell_params(msg, ParamSpelling::kPython),
            "context: step_time='x' needs disable_hybrid_kv_cache_manager=False and "
            "async_scheduling=True");
}

TEST(Param, LeavesTextWithoutMarkersAlone) {
  EXPECT_EQ(spell_params("plain -- text", ParamSpelling::kCli), "plain -- text");
  EXPECT_EQ(spell_params("", ParamSpelling::kPython), "");
  // An unterminated marker (never produced by param()) is kept as it is, not dropped.
  EXPECT_EQ(spell_params("a\x1e"
                         "b",
                         ParamSpelling::kCli),
            "a\x1e"
            "b");
}

}  // namespace
}  // namespace kvsim
