// A scratch directory holding a small random Vidur-format trace (trace.csv), for the tests of
// the grid commands (kvsim sweep, kvsim size): path() names files next to it.
#pragma once

#include <cstdint>
#include <fstream>
#include <random>
#include <string>

#include "../scratch_dir_test.h"
#include "cli_run.h"

namespace kvsim_cli_test {

// The trace: `requests` requests `gap_s` seconds apart, prompt and output lengths uniform in
// [in_lo, in_hi] and [out_lo, out_hi], drawn from `seed`.
struct GridTraceSpec {
  uint32_t seed = 0;
  int requests = 0;
  double gap_s = 0;
  int in_lo = 0, in_hi = 0, out_lo = 0, out_hi = 0;
};

class CliGridFixture : public kvsim_test::ScratchDirTest {
 protected:
  explicit CliGridFixture(const GridTraceSpec& spec) : spec_(spec) {}
  void SetUp() override {
    ScratchDirTest::SetUp();
    std::mt19937 rng(spec_.seed);
    std::uniform_int_distribution<int> in(spec_.in_lo, spec_.in_hi),
        out(spec_.out_lo, spec_.out_hi);
    std::ofstream t(dir_ / "trace.csv");
    t << "arrived_at,num_prefill_tokens,num_decode_tokens\n";
    for (int i = 0; i < spec_.requests; ++i) {
      t << i * spec_.gap_s << "," << in(rng) << "," << out(rng) << "\n";
    }
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  GridTraceSpec spec_;
};

}  // namespace kvsim_cli_test
