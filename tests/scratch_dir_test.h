// A per-test scratch directory for tests that write files (trace fixtures, outputs): created in
// SetUp under the system temp directory, named after the suite and test, removed in TearDown.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kvsim_test {

class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("kvsim_") + info->test_suite_name() + "_" + info->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes `bytes` to dir_/name and returns the path.
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

  std::filesystem::path dir_;
};

}  // namespace kvsim_test
