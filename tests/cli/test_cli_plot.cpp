// `--plot FILE` on replay (plain and cluster) and sweep, as size has it (cli/plot_output.h;
// size's own cases are in test_cli_output_guarantees.cpp): an output like the others (atomic,
// never an input, no folder created, never stdout, previous file kept when anything fails), the
// script's inputs written to temporaries that go away, stdout outputs kept clean. Stand-in plot
// scripts (KVSIM_TOOLS_DIR) test this without matplotlib; the interpreter search (KVSIM_PYTHON,
// python3 on PATH, /usr/bin/python3) is tested with stand-in interpreters; the real scripts and
// matplotlib draw real files where an interpreter with matplotlib exists, else those tests skip.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cli_files_fixture.h"
#include "cli_run.h"

namespace {

using kvsim_cli_test::cat;
using kvsim_cli_test::CliRun;
using kvsim_cli_test::run_kvsim;
using kvsim_cli_test::run_shell;
using kvsim_cli_test::slurp;
namespace fs = std::filesystem;

bool have_python() {
  return std::system("python3 -c '' >/dev/null 2>&1") == 0;
}

std::string plot_kvsim() {
  return cat({"'", KVSIM_BINARY, "' "});
}

// The shell line's stdout and stderr together.
CliRun plot_sh(const std::string& script) {
  return run_shell(cat({"( ", script, " ) 2>&1"}));
}

class CliPlot : public kvsim_cli_test::CliFilesFixture {
 protected:
  void SetUp() override {
    CliFilesFixture::SetUp();
    fs::create_directories(dir_ / "tmp");
  }
  // Stand-ins for tools/plot_*.py: each writes "PLOT <script> <format>" to its -o path, then
  // one line per input file ("<flag or 'input'> <its first line>"), and says so on stdout as
  // the real scripts do; with FAIL in the environment it writes half a file and fails.
  std::string fake_plot_env() const {
    fs::create_directories(dir_ / "tools");
    for (const char* script : {"plot_replay.py", "plot_cluster.py", "plot_sweep.py"}) {
      write(cat({"tools/", script}),
            "import os, sys\n"
            "a = sys.argv\n"
            "out = a[a.index('-o') + 1]\n"
            "fmt = a[a.index('--format') + 1]\n"
            "lines = ['PLOT ' + os.path.basename(a[0]) + ' ' + fmt]\n"
            "i = 1\n"
            "while i < len(a):\n"
            "    if a[i] in ('-o', '--format'):\n"
            "        i += 2\n"
            "        continue\n"
            "    flag, path = (a[i], a[i + 1]) if a[i].startswith('--') else ('input', a[i])\n"
            "    i += 2 if a[i].startswith('--') else 1\n"
            "    with open(path) as f:\n"
            "        lines.append(flag + ' ' + f.readline().rstrip('\\n'))\n"
            "with open(out, 'w') as f:\n"
            "    f.write('\\n'.join(lines) + '\\n')\n"
            "if os.environ.get('FAIL'):\n"
            "    sys.exit(1)\n"
            "print('wrote ' + out)\n");
    }
    return cat({"TMPDIR=", (dir_ / "tmp").string(),
                " KVSIM_PYTHON=python3 KVSIM_TOOLS_DIR=", (dir_ / "tools").string(), " "});
  }
  // The script inputs left in TMPDIR (none may be).
  int plot_inputs_left() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir_ / "tmp")) n += e.exists() ? 1 : 0;
    return n;
  }
  std::string sweep(const std::string& extra) const {
    return cat({"sweep ", trace_, " --model qwen2.5-7b --max-model-len 4096 --step-time fixed:5 ",
                "--block-sizes 16,32 ", extra});
  }
};

// --- replay ------------------------------------------------------------------------------------

TEST_F(CliPlot, ReplayPlotGetsTheSummaryTimelineAndRequestsAndKeepsStdoutClean) {
  if (!have_python()) GTEST_SKIP() << "no python3";
  const std::string plot = write("r.svg", "previous plot\n");
  // --json - alone on stdout: neither the report nor the script's "wrote" line joins it.
  const CliRun r = plot_sh(cat(
      {fake_plot_env(), plot_kvsim(), replay(cat({"--json - --plot ", plot})), " 2>/dev/null"}));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.rfind("{", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find("wrote"), std::string::npos) << r.out;
  const std::string drawn = slurp(plot);
  EXPECT_EQ(drawn.rfind("PLOT plot_replay.py svg\n--summary {\n--timeline step,time_s,", 0), 0u)
      << drawn;
  EXPECT_NE(drawn.find("\n--requests request_id,"), std::string::npos) << drawn;
  EXPECT_EQ(temporaries(), 0);
  EXPECT_EQ(plot_inputs_left(), 0);
}

TEST_F(CliPlot, AClusterReplayPlotsPerReplica) {
  if (!have_python()) GTEST_SKIP() << "no python3";
  const std::string plot = (dir_ / "c.png").string();
  const CliRun r =
      plot_sh(cat({fake_plot_env(), plot_kvsim(), replay(cat({"--replicas 2 --plot ", plot}))}));
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string drawn = slurp(plot);
  EXPECT_EQ(drawn.rfind("PLOT plot_cluster.py png\n--summary {\n--timeline replica,step,", 0), 0u)
      << drawn;
  EXPECT_NE(drawn.find("\n--requests replica,request_id,"), std::string::npos) << drawn;
  EXPECT_EQ(plot_inputs_left(), 0);
}

TEST_F(CliPlot, AFailingReplayPlotChangesNoOutput) {
  if (!have_python()) GTEST_SKIP() << "no python3";
  const std::string plot = write("r.png", "previous plot\n");
  const std::string json = write("r.json", "previous json\n");
  const CliRun f = plot_sh(cat({"FAIL=1 ", fake_plot_env(), plot_kvsim(),
                                replay(cat({"--json ", json, " --plot ", plot}))}));
  EXPECT_EQ(f.status, 2) << f.out;
  EXPECT_NE(f.out.find("--plot " + plot + ": python3"), std::string::npos) << f.out;
  EXPECT_EQ(slurp(plot), "previous plot\n");
  EXPECT_EQ(slurp(json), "previous json\n");
  EXPECT_EQ(temporaries(), 0);
  EXPECT_EQ(plot_inputs_left(), 0);
}

TEST_F(CliPlot, AReplayThatRejectsEveryRequestDrawsNothing) {
  if (!have_python()) GTEST_SKIP() << "no python3";
  const std::string plot = write("r.png", "previous plot\n");
  const CliRun r = plot_sh(
      cat({fake_plot_env(), plot_kvsim(), replay(cat({"--max-model-len 1 --plot ", plot}))}));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("no output file was changed"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(plot), "previous plot\n");
  EXPECT_EQ(temporaries(), 0);
}

TEST_F(CliPlot, AReplayPlotIsRefusedWhereAnyOutputWouldBe) {
  const std::string json = (dir_ / "r.out").string();
  const CliRun same = run_kvsim(replay(cat({"--json ", json, " --plot ", json})));
  EXPECT_EQ(same.status, 2) << same.out;
  EXPECT_NE(same.out.find("--json and --plot name the same file"), std::string::npos) << same.out;
  EXPECT_FALSE(fs::exists(json));
  const CliRun dash = run_kvsim(replay("--plot -"));
  EXPECT_EQ(dash.status, 2) << dash.out;
  EXPECT_NE(dash.out.find("--plot -: a plot cannot go to stdout"), std::string::npos) << dash.out;
  const CliRun input = run_kvsim(replay(cat({"--plot ", trace_})));
  EXPECT_EQ(input.status, 2) << input.out;
  EXPECT_NE(input.out.find("is the same file as the trace"), std::string::npos) << input.out;
  EXPECT_EQ(slurp(trace_), trace_text());
  const std::string missing = (dir_ / "missing" / "r.png").string();
  const CliRun folder = run_kvsim(replay(cat({"--plot ", missing})));
  EXPECT_EQ(folder.status, 2) << folder.out;
  EXPECT_NE(folder.out.find("--plot " + missing + ": cannot open for writing"), std::string::npos)
      << folder.out;
  EXPECT_FALSE(fs::exists(dir_ / "missing"));
  EXPECT_EQ(temporaries(), 0);
}

// --- sweep -------------------------------------------------------------------------------------

TEST_F(CliPlot, SweepPlotGetsTheCsvAndKeepsStdoutClean) {
  if (!have_python()) GTEST_SKIP() << "no python3";
  const std::string plot = (dir_ / "s.pdf").string();
  const CliRun r = plot_sh(
      cat({fake_plot_env(), plot_kvsim(), sweep(cat({"--csv - --plot ", plot})), " 2>/dev/null"}));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("wrote"), std::string::npos) << r.out;
  const std::string header = r.out.substr(0, r.out.find('\n'));
  EXPECT_EQ(slurp(plot), cat({"PLOT plot_sweep.py pdf\ninput ", header, "\n"}));
  EXPECT_EQ(plot_inputs_left(), 0);
}

TEST_F(CliPlot, SweepPlotDoesNotChangeTheCsv) {
  if (!have_python()) GTEST_SKIP() << "no python3";
  const std::string plain = (dir_ / "a.csv").string();
  const std::string with_plot = (dir_ / "b.csv").string();
  ASSERT_EQ(run_kvsim(sweep(cat({"-q --csv ", plain}))).status, 0);
  const CliRun r =
      plot_sh(cat({fake_plot_env(), plot_kvsim(),
                   sweep(cat({"-q --csv ", with_plot, " --plot ", dir_.string(), "/s.png"}))}));
  ASSERT_EQ(r.status, 0) << r.out;
  // The same sweep_id: --plot, like --csv, is not a result-defining flag (shards still merge).
  EXPECT_EQ(slurp(plain), slurp(with_plot));
}

TEST_F(CliPlot, AFailingSweepPlotKeepsThePreviousCsvAndPlot) {
  if (!have_python()) GTEST_SKIP() << "no python3";
  const std::string csv = write("s.csv", "previous csv\n");
  const std::string plot = write("s.png", "previous plot\n");
  const CliRun f = plot_sh(cat({"FAIL=1 ", fake_plot_env(), plot_kvsim(),
                                sweep(cat({"-q --csv ", csv, " --plot ", plot}))}));
  EXPECT_EQ(f.status, 2) << f.out;
  EXPECT_NE(f.out.find("--plot " + plot + ": python3"), std::string::npos) << f.out;
  EXPECT_EQ(slurp(csv), "previous csv\n");
  EXPECT_EQ(slurp(plot), "previous plot\n");
  EXPECT_EQ(temporaries(), 0);
  EXPECT_EQ(plot_inputs_left(), 0);
}

TEST_F(CliPlot, SweepMergeDrawsTheMergedCsvAndNeverOverAShard) {
  if (!have_python()) GTEST_SKIP() << "no python3";
  const std::string a = (dir_ / "a.csv").string();
  const std::string b = (dir_ / "b.csv").string();
  ASSERT_EQ(run_kvsim(sweep(cat({"-q --shard 0/2 --csv ", a}))).status, 0);
  ASSERT_EQ(run_kvsim(sweep(cat({"-q --shard 1/2 --csv ", b}))).status, 0);
  const CliRun shard = run_kvsim(cat({"sweep --merge ", a, " ", b, " --plot ", a}));
  EXPECT_EQ(shard.status, 2) << shard.out;
  EXPECT_NE(shard.out.find("--plot " + a + ": is the same file as the --merge input"),
            std::string::npos)
      << shard.out;
  const std::string plot = (dir_ / "m.svg").string();
  const CliRun r = plot_sh(cat({fake_plot_env(), plot_kvsim(), "sweep --merge ", a, " ", b,
                                " --plot ", plot, " 2>/dev/null"}));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.rfind("config_index,", 0), 0u) << r.out;  // the merged CSV on stdout, alone
  EXPECT_EQ(slurp(plot).rfind("PLOT plot_sweep.py svg\ninput config_index,", 0), 0u) << slurp(plot);
  const CliRun dash = run_kvsim(cat({"sweep --merge ", a, " --plot -"}));
  EXPECT_EQ(dash.status, 2) << dash.out;
  EXPECT_NE(dash.out.find("--plot -: a plot cannot go to stdout"), std::string::npos) << dash.out;
}

// --- the interpreter ---------------------------------------------------------------------------

class CliPlotPython : public CliPlot {
 protected:
  // A folder holding a stand-in `python3` (a shell script) to put first on PATH.
  std::string fake_python(const std::string& body) const {
    fs::create_directories(dir_ / "bin");
    const std::string py = write("bin/python3", cat({"#!/bin/sh\n", body}));
    fs::permissions(py, fs::perms::owner_all);
    return (dir_ / "bin").string();
  }
  std::string size(const std::string& extra) const {
    return cat({"size ", trace_,
                " --model qwen2.5-7b --max-model-len 4096 --slo-ttft-p99 5 --slo-tpot-p99 1"
                " --gpus l40s --tp 1 --max-replicas 2 -q ",
                extra});
  }
};

TEST_F(CliPlotPython, PythonOnPathIsUsedWhenItHasMatplotlib) {
  // It answers the matplotlib check (-c 'import matplotlib') and "draws" by writing its name.
  const std::string bin = fake_python(
      "if [ \"$1\" = -c ]; then exit 0; fi\n"
      "while [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then echo FAKE > \"$2\"; fi; shift; done\n");
  const std::string plot = (dir_ / "z.png").string();
  const CliRun r = plot_sh(cat({"env -u KVSIM_PYTHON PATH=", bin, ":/usr/bin:/bin ", plot_kvsim(),
                                size(cat({"--plot ", plot}))}));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(slurp(plot), "FAKE\n");
}

TEST_F(CliPlotPython, WithoutMatplotlibOnPathDebiansPythonIsTriedAndEachOneTriedIsNamed) {
  const std::string bin = fake_python("exit 1\n");  // no matplotlib (nor anything else)
  const std::string plot = (dir_ / "z.png").string();
  const CliRun r = plot_sh(cat({"env -u KVSIM_PYTHON -u KVSIM_TOOLS_DIR PATH=", bin, " ",
                                plot_kvsim(), size(cat({"--plot ", plot}))}));
  const bool debian_has_it =
      std::system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") == 0;
  if (debian_has_it) {
    // The quick start's interpreter (tools/install-deps.sh: python3-matplotlib) draws the plot.
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(slurp(plot).rfind("\x89PNG", 0), 0u);
  } else {
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find(cat({"--plot ", plot,
                              ": no Python with matplotlib found (tried python3 "
                              "on PATH (",
                              bin, "/python3): no matplotlib; /usr/bin/python3: "})),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("set KVSIM_PYTHON"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(plot));
  }
  EXPECT_EQ(temporaries(), 0);
}

TEST_F(CliPlotPython, KvsimPythonIsUsedAsGiven) {
  const CliRun r = plot_sh(cat({"KVSIM_PYTHON=", (dir_ / "no-such-python").string(), " ",
                                plot_kvsim(), size(cat({"--plot ", (dir_ / "z.png").string()}))}));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find(cat({"cannot run ", (dir_ / "no-such-python").string()})), std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(dir_ / "z.png"));
}

// --- real matplotlib ---------------------------------------------------------------------------

// The real tools/plot_*.py, with whichever interpreter kvsim finds (KVSIM_PYTHON unset).
TEST_F(CliPlotPython, RealPlotsFromEveryCommand) {
  if (std::system("python3 -c 'import matplotlib' 2>/dev/null") != 0 &&
      std::system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") != 0) {
    GTEST_SKIP() << "no python3 with matplotlib (python3 on PATH, /usr/bin/python3)";
  }
  const std::string env = "env -u KVSIM_PYTHON -u KVSIM_TOOLS_DIR ";
  const std::string r = (dir_ / "replay.png").string();
  const std::string c = (dir_ / "cluster.svg").string();
  const std::string s = (dir_ / "sweep.pdf").string();
  const std::string z = (dir_ / "size.png").string();
  const CliRun a = plot_sh(cat({env, plot_kvsim(), replay(cat({"--plot ", r}))}));
  ASSERT_EQ(a.status, 0) << a.out;
  const CliRun b =
      plot_sh(cat({env, plot_kvsim(), replay(cat({"--replicas 2 --slo-ttft-p99 1 --plot ", c}))}));
  ASSERT_EQ(b.status, 0) << b.out;
  const CliRun d = plot_sh(cat({env, plot_kvsim(), sweep(cat({"-q --plot ", s}))}));
  ASSERT_EQ(d.status, 0) << d.out;
  const CliRun e = plot_sh(cat({env, plot_kvsim(), size(cat({"--plot ", z}))}));
  ASSERT_EQ(e.status, 0) << e.out;
  EXPECT_EQ(slurp(r).rfind("\x89PNG", 0), 0u);
  EXPECT_NE(slurp(c).find("<svg"), std::string::npos);
  EXPECT_EQ(slurp(s).rfind("%PDF", 0), 0u);
  EXPECT_EQ(slurp(z).rfind("\x89PNG", 0), 0u);
  EXPECT_EQ(temporaries(), 0);
}

}  // namespace
