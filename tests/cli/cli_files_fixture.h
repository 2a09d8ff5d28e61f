// A scratch directory holding a small Azure-format trace (24 requests), for the CLI tests of the
// file guarantees (docs/files.md): replay() builds a quick replay command line, temporaries()
// counts kvsim's ".NAME.kvsim-XXXXXX" files left in the directory.
#pragma once

#include <filesystem>
#include <string>

#include "../scratch_dir_test.h"
#include "cli_run.h"

namespace kvsim_cli_test {

class CliFilesFixture : public kvsim_test::ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    trace_ = write("trace.csv", trace_text());
  }
  static std::string trace_text() {
    std::string t = "arrived_at,num_prefill_tokens,num_decode_tokens\n";
    for (int i = 0; i < 24; ++i)
      t += cat({std::to_string(i), ".5,", std::to_string(100 + i), ",5\n"});
    return t;
  }
  std::string replay(const std::string& extra) const {
    return cat({"replay ", trace_, " --step-time fixed:5 --no-progress ", extra});
  }
  // Files in the scratch directory whose name marks a kvsim temporary.
  int temporaries() const {
    int n = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_)) {
      n += e.path().filename().string().find(".kvsim-") != std::string::npos ? 1 : 0;
    }
    return n;
  }
  std::string trace_;
};

}  // namespace kvsim_cli_test
