// Issue 12, "the JSON summary has no count of rows read and rows dropped": with --skip-bad-rows
// the counts by reason are in the JSON summary (so `--json -`, whose stderr may be lost, keeps
// them) and in the text report, and they agree with the rows of the trace.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "../scratch_dir_test.h"
#include "cli_run.h"

namespace {

using kvsim_cli_test::cat;
using kvsim_cli_test::CliRun;
using kvsim_cli_test::run_kvsim;

class CliRowsDropped : public kvsim_test::ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    // Five rows: row 2 has a bad prefill count, row 4 lacks its decode count.
    trace_ = write("bad.csv",
                   "arrived_at,num_prefill_tokens,num_decode_tokens\n"
                   "0.5,100,5\n1.5,x,5\n2.5,120,5\n3.5,130\n4.5,140,5\n");
  }
  std::string replay(const std::string& extra) const {
    return cat({"replay ", trace_, " --skip-bad-rows --step-time fixed:5 --no-progress ", extra});
  }
  std::string trace_;
};

constexpr const char* kBadCount = "field 'num_prefill_tokens': not an integer token count";
constexpr const char* kMissing =
    "field 'num_decode_tokens': missing value: 2 fields, the header has 3";

TEST_F(CliRowsDropped, JsonOnStdoutCountsRowsReadAndDroppedByReason) {
  const CliRun r = run_kvsim(replay("--json -"), "2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("rows_read"), 5);
  EXPECT_EQ(j.at("rows_dropped"), 2);
  EXPECT_EQ(j.at("rows_dropped_by_reason"), (nlohmann::json{{kBadCount, 1}, {kMissing, 1}}));
  EXPECT_EQ(j.at("requests"), 3);
}

TEST_F(CliRowsDropped, TextReportCountsThemToo) {
  const CliRun r = run_kvsim(replay(""), "2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find(cat({"2 of 5 rows dropped: 1 ", kMissing, "; 1 ", kBadCount})),
            std::string::npos)
      << r.out;
}

TEST_F(CliRowsDropped, ACleanTraceReportsZeroDropped) {
  const std::string clean =
      write("clean.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0.5,100,5\n");
  const CliRun r = run_kvsim(cat({"replay ", clean, " --step-time fixed:5 --no-progress --json -"}),
                             "2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("rows_read"), 1);
  EXPECT_EQ(j.at("rows_dropped"), 0);
  EXPECT_TRUE(j.at("rows_dropped_by_reason").empty());
}

}  // namespace
