// `kvsim calibrate` end to end: a replay's own per-request CSV is measurements the physics model
// made, so calibrating on it writes a file that `--step-time physics:FILE` reads and that
// reproduces the measurements; bad input and refused fits exit 2 with one line; outputs follow
// docs/files.md.
#ifdef KVSIM_HAVE_CALIBRATE
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../scratch_dir_test.h"
#include "cli_run.h"

namespace {

namespace fs = std::filesystem;
using kvsim_cli_test::cat;
using kvsim_cli_test::CliRun;
using kvsim_cli_test::run_kvsim;
using kvsim_cli_test::slurp;

const std::string kEngine =
    "--model llama-3.1-8b --gpu h100-80g --max-num-batched-tokens 2048 --max-num-seqs 128 "
    "--max-model-len 4096";

std::string shipped() {
  return cat({KVSIM_SOURCE_DIR, "/calibration/physics/h100-vllm-blis.json"});
}

class CliCalibrate : public kvsim_test::ScratchDirTest {};

TEST_F(CliCalibrate, FitsAReplaysOwnMeasurementsAndTheResultReplays) {
  const fs::path trace = dir_ / "t.jsonl";
  const fs::path measured = dir_ / "measured.csv";
  const fs::path out = dir_ / "cal.json";
  const fs::path report = dir_ / "report.json";
  ASSERT_EQ(run_kvsim(cat({"gen -n 600 --rate 12 --input-len uniform:100,1500 --output-len "
                           "uniform:10,200 --seed 5 -q -o '",
                           trace.string(), "'"}))
                .status,
            0);
  const CliRun made =
      run_kvsim(cat({"replay '", trace.string(), "' ", kEngine, " --step-time physics:'", shipped(),
                     "' --requests '", measured.string(), "'"}),
                "> /dev/null 2>&1");
  ASSERT_EQ(made.status, 0) << made.out;
  const CliRun r = run_kvsim(
      cat({"calibrate '", measured.string(), "' ", kEngine, " --fit beta2b,alpha0 --start '",
           shipped(), "' -o '", out.string(), "' --json '", report.string(), "'"}));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("fit error"), std::string::npos) << r.out;
  const nlohmann::json cal = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(cal.at("format"), "kvsim-physics/1");
  EXPECT_EQ(cal.at("gpu"), "h100-80g");
  EXPECT_EQ(cal.at("fit").at("cv_scheme"), "leave one group out");
  EXPECT_LT(cal.at("fit").at("fit_error_pct").get<double>(), 1.0);
  EXPECT_EQ(cal.at("fit").at("data").at(0).at("requests"), 600);
  EXPECT_EQ(cal.at("fit").at("data").at(0).at("xxh3_64").get<std::string>().size(), 16u);
  // The data were made with the start: the fit stays there.
  EXPECT_NEAR(cal.at("beta").at(9).get<double>(), 1.94710771, 0.1);
  const nlohmann::json rep = nlohmann::json::parse(slurp(report));
  EXPECT_EQ(rep.at("fit_errors").size(), 18u);  // 9 statistics x 2 halves
  // The written file is a step-time model.
  const CliRun again = run_kvsim(
      cat({"replay '", trace.string(), "' ", kEngine, " --step-time physics:'", out.string(), "'"}),
      "2>&1");
  EXPECT_EQ(again.status, 0) << again.out;
  EXPECT_NE(again.out.find("physics(llama-3.1-8b on h100-80g"), std::string::npos) << again.out;
  // The report says where the clock comes from, with the fit's own error.
  EXPECT_NE(again.out.find("clock: fitted (kvsim calibrate on 1 measurement file(s)"),
            std::string::npos)
      << again.out;
  EXPECT_NE(again.out.find("fit: median |error|"), std::string::npos) << again.out;
}

TEST_F(CliCalibrate, BadInputAndRefusedFitsAreOneLineErrors) {
  const fs::path bad = dir_ / "bad.csv";
  {
    std::ofstream(bad) << "arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n0,10,5,0.1,1\n"
                          "1,10,x,0.1,1\n";
  }
  CliRun r = run_kvsim(
      cat({"calibrate '", bad.string(), "' ", kEngine, " -o '", (dir_ / "o.json").string(), "'"}));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find(cat({bad.string(), ":3, field output_tokens"})), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir_ / "o.json"));

  const fs::path good = dir_ / "good.csv";
  {
    std::ofstream g(good);
    g << "arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n";
    for (int i = 0; i < 40; ++i) g << i * 0.2 << ",300,50,0.05,0.6\n";
  }
  r = run_kvsim(cat({"calibrate '", good.string(), "' ", kEngine, " --fit beta7,beta3 -o '",
                     (dir_ / "o.json").string(), "'"}));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("beta3 (weight reads) is exactly a combination"), std::string::npos)
      << r.out;
  // The output may not be a measurement file, nor a file a run file names.
  const fs::path trace = dir_ / "t.jsonl";
  {
    std::ofstream(trace) << R"({"arrival_s": 0, "input_tokens": 10, "output_tokens": 4})"
                         << "\n"
                         << R"({"arrival_s": 1, "input_tokens": 12, "output_tokens": 4})"
                         << "\n";
    std::ofstream(dir_ / "run.json")
        << R"({"format": "kvsim-calibration-run/1", "trace": "t.jsonl", "groups": [{"ttft_mean_s": 0.05}]})";
  }
  r = run_kvsim(cat(
      {"calibrate '", (dir_ / "run.json").string(), "' ", kEngine, " -o '", trace.string(), "'"}));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("refusing to overwrite an input"), std::string::npos) << r.out;
  r = run_kvsim(cat({"calibrate '", good.string(), "' ", kEngine, " -o '", good.string(), "'"}));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("refusing to overwrite an input"), std::string::npos) << r.out;
}

}  // namespace
#endif  // KVSIM_HAVE_CALIBRATE
