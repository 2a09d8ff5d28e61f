// docs/files.md's output guarantees where they once failed (issue 23 §2): size --plot goes
// through OutputFiles like every other output; a failed replay leaves its destinations as they
// were; SIGHUP/SIGPIPE/SIGXFSZ clean up and report; a path that is stdout counts as "-"; a trace
// that is a pipe or FIFO is read once, and a blocked open or read answers SIGTERM.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "cli_files_fixture.h"
#include "cli_run.h"

namespace {

using kvsim_cli_test::cat;
using kvsim_cli_test::CliRun;
using kvsim_cli_test::run_kvsim;
using kvsim_cli_test::slurp;
namespace fs = std::filesystem;

class CliOutputs : public kvsim_cli_test::CliFilesFixture {
 protected:
  // One candidate: the search takes well under a second.
  std::string size(const std::string& extra) const {
    return cat({"size ", trace_,
                " --model qwen2.5-7b --max-model-len 4096 --slo-ttft-p99 5 --slo-tpot-p99 1"
                " --gpus l40s --tp 1 --max-replicas 2 ",
                extra});
  }
  // A stand-in for tools/plot_size.py (no matplotlib needed): writes "PLOT <format>" to its -o
  // path and says so on stdout, as the real script does; with FAIL in the environment it writes
  // half a file and fails.
  std::string fake_plot_env() const {
    fs::create_directories(dir_ / "tools");
    write("tools/plot_size.py",
          "import os, sys\n"
          "a = sys.argv\n"
          "out = a[a.index('-o') + 1]\n"
          "fmt = a[a.index('--format') + 1] if '--format' in a else 'none'\n"
          "with open(out, 'w') as f:\n"
          "    f.write('PLOT ' + fmt + '\\n')\n"
          "if os.environ.get('FAIL'):\n"
          "    sys.exit(1)\n"
          "print('wrote ' + out)\n");
    return cat({"KVSIM_PYTHON=python3 KVSIM_TOOLS_DIR=", (dir_ / "tools").string(), " "});
  }
  static bool have_python() { return std::system("python3 -c '' >/dev/null 2>&1") == 0; }
};

// Runs `kvsim` with args through the shell with env in front (env settings, ulimit, pipes).
CliRun run_sh(const std::string& script) {
  CliRun r;
  FILE* p = popen(cat({"( ", script, " ) 2>&1"}).c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string quoted_kvsim() {
  return cat({"'", KVSIM_BINARY, "' "});
}

// --- size --plot is an output like the others -------------------------------------------------

TEST_F(CliOutputs, SizePlotNamedThroughASymlinkToTheTraceIsRefused) {
  if (!have_python()) GTEST_SKIP() << "no python3";
  fs::create_symlink(trace_, dir_ / "plot.png");
  const CliRun r = run_sh(
      cat({fake_plot_env(), quoted_kvsim(), size(cat({"--plot ", (dir_ / "plot.png").string()}))}));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("is the same file as the trace"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(trace_), trace_text());
  EXPECT_EQ(temporaries(), 0);
}

TEST_F(CliOutputs, SizePlotAndJsonMayNotNameOneFile) {
  const std::string out = (dir_ / "s.out").string();
  const CliRun r = run_kvsim(size(cat({"--json ", out, " --plot ", out})));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--json and --plot name the same file"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));
  const CliRun dash = run_kvsim(size("--plot -"));
  EXPECT_EQ(dash.status, 2) << dash.out;
  EXPECT_NE(dash.out.find("--plot -: a plot cannot go to stdout"), std::string::npos) << dash.out;
}

TEST_F(CliOutputs, SizePlotKeepsStdoutJsonCleanAndIsWrittenWhole) {
  if (!have_python()) GTEST_SKIP() << "no python3";
  const std::string plot = write("p.svg", "previous plot\n");
  // stdout only: the script's "wrote ..." line must not land in the JSON.
  const CliRun r = run_sh(cat(
      {fake_plot_env(), quoted_kvsim(), size(cat({"--json - --plot ", plot})), " 2>/dev/null"}));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.rfind("{", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find("wrote"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(plot), "PLOT svg\n");  // the format comes from the destination's name
  EXPECT_EQ(temporaries(), 0);
  // A failing script leaves the previous plot (and no temporary), even though it wrote half.
  write("p.svg", "previous plot\n");
  const CliRun f =
      run_sh(cat({"FAIL=1 ", fake_plot_env(), quoted_kvsim(), size(cat({"--plot ", plot}))}));
  EXPECT_EQ(f.status, 2) << f.out;
  EXPECT_NE(f.out.find("--plot " + plot + ": python3"), std::string::npos) << f.out;
  EXPECT_EQ(slurp(plot), "previous plot\n");
  EXPECT_EQ(temporaries(), 0);
}

TEST_F(CliOutputs, SizePlotDoesNotCreateFolders) {
  if (!have_python()) GTEST_SKIP() << "no python3";
  const std::string plot = (dir_ / "missing" / "p.png").string();
  const CliRun r = run_sh(cat({fake_plot_env(), quoted_kvsim(), size(cat({"--plot ", plot}))}));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--plot " + plot + ": cannot open for writing"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir_ / "missing"));
}

TEST_F(CliOutputs, SizeMergeRefusesAPlotThatIsAShard) {
  const std::string shard = write("a.json", "{}\n");
  const CliRun r = run_kvsim(cat({"size --merge ", shard, " --plot ", shard}));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--plot " + shard + ": is the same file as the --merge input"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(slurp(shard), "{}\n");
}

// --- a failed replay changes no file -------------------------------------------------------

TEST_F(CliOutputs, AReplayThatRejectsEveryRequestKeepsThePreviousOutputs) {
  const std::string json = write("r.json", "previous json\n");
  const std::string timeline = write("t.csv", "previous timeline\n");
  const CliRun r =
      run_kvsim(replay(cat({"--max-model-len 1 --json ", json, " --timeline ", timeline})));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("requests were rejected"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no output file was changed"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(json), "previous json\n");
  EXPECT_EQ(slurp(timeline), "previous timeline\n");
  EXPECT_EQ(temporaries(), 0);
}

// --- SIGPIPE, SIGXFSZ and SIGHUP ---------------------------------------------------------------

// 300 requests of 50 decode steps: a timeline of some 20 KB.
std::string long_trace_text() {
  std::string t = "arrived_at,num_prefill_tokens,num_decode_tokens\n";
  for (int i = 0; i < 300; ++i)
    t += cat({std::to_string(i), ".5,", std::to_string(100 + i), ",50\n"});
  return t;
}

// 1500 requests of 60 decode steps at 20x the rate: a timeline of some 7 MB.
std::string many_steps_trace_text() {
  std::string t = "arrived_at,num_prefill_tokens,num_decode_tokens\n";
  for (int i = 0; i < 1500; ++i)
    t += cat({std::to_string(i), ".05,", std::to_string(50 + i % 300), ",60\n"});
  return t;
}

TEST_F(CliOutputs, AFileSizeLimitIsAWriteErrorNotASilentDeath) {
  // ulimit -f counts KiB: the timeline is larger, so a write fails with EFBIG (SIGXFSZ ignored):
  // the first one, or one part-way through a timeline of many writes.
  struct Case {
    std::string trace_text;
    const char* limit_kib;
    const char* args;
  };
  for (const Case& c : {Case{long_trace_text(), "4", ""},
                        Case{many_steps_trace_text(), "1536", " --time-scale 20"}}) {
    const std::string trace = write("t_in.csv", c.trace_text);
    const std::string out = write("t.csv", "previous timeline\n");
    const CliRun r =
        run_sh(cat({"ulimit -f ", c.limit_kib, "; ", quoted_kvsim(), "replay ", trace, c.args,
                    " --step-time fixed:5 --no-progress --timeline ", out, " >/dev/null"}));
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find(cat({"--timeline ", out, ": cannot write: File too large"})),
              std::string::npos)
        << r.out;
    EXPECT_EQ(slurp(out), "previous timeline\n");
    EXPECT_EQ(temporaries(), 0);
  }
}

TEST_F(CliOutputs, AClosedStdoutPipeIsAWriteErrorNamingTheFlag) {
  const std::string trace = write("long.csv", long_trace_text());
  const std::string json = write("r.json", "previous json\n");
  // The reader is gone before kvsim writes: every write to stdout fails with EPIPE.
  const CliRun r = run_sh(cat({"{ sleep 0.3; ", quoted_kvsim(), "replay ", trace,
                               " --step-time fixed:5 --no-progress --timeline - --json ", json,
                               "; echo \"status=$?\" >&2; } | true"}));
  EXPECT_NE(r.out.find("status=2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("writing standard output failed (--timeline -): Broken pipe"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(slurp(json), "previous json\n");
  EXPECT_EQ(temporaries(), 0);
}

TEST_F(CliOutputs, SighupStopsAReplayLikeSigterm) {
  const std::string big = (dir_ / "big.jsonl").string();
  ASSERT_EQ(run_kvsim(cat({"gen -q -n 400000 --rate 2000 -o ", big})).status, 0);
  const std::string out = write("t.csv", "previous output\n");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
    ::execl(KVSIM_BINARY, KVSIM_BINARY, "replay", big.c_str(), "--step-time", "fixed:5",
            "--no-progress", "--timeline", out.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 24000 && temporaries() < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(temporaries(), 1);
  ::kill(pid, SIGHUP);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGHUP);
  EXPECT_EQ(slurp(out), "previous output\n");
  EXPECT_EQ(temporaries(), 0);
}

// --- the streamed timeline (issue 27) -----------------------------------------------------

// --timeline into a file is written while the replay runs (a plain replay with no --plot,
// --metrics or --vllm-log); into stdout, or next to --metrics, the rows are held and written at
// the end. The bytes are the same, sync and async, whole trace (--requests) and streamed trace.
TEST_F(CliOutputs, AStreamedTimelineHasTheHeldBytes) {
  const std::string trace = write("long.csv", long_trace_text());
  for (const std::string mode : {"", "--no-async-scheduling"}) {
    for (const std::string& requests : {std::string(), (dir_ / "r.csv").string()}) {
      const std::string base = cat({"replay ", trace, " --step-time fixed:5 --no-progress ", mode,
                                    requests.empty() ? "" : cat({" --requests ", requests})});
      const std::string streamed = (dir_ / "streamed.csv").string();
      const std::string held = (dir_ / "held.csv").string();
      ASSERT_EQ(run_kvsim(cat({base, " --timeline ", streamed}), ">/dev/null 2>&1").status, 0);
      ASSERT_EQ(
          run_kvsim(cat({base, " --timeline ", held, " --metrics ", (dir_ / "m.txt").string()}),
                    ">/dev/null 2>&1")
              .status,
          0);
      const CliRun to_stdout = run_kvsim(cat({base, " --timeline -"}), "2>/dev/null");
      ASSERT_EQ(to_stdout.status, 0);
      const std::string want = slurp(held);
      EXPECT_GT(want.size(), 20000u);
      EXPECT_EQ(slurp(streamed), want) << mode << requests;
      EXPECT_EQ(to_stdout.out, want) << mode << requests;
      EXPECT_EQ(temporaries(), 0);
    }
  }
}

// A timeline of several MiB goes out in many writes while the replay runs (the writer's chunks,
// the stream's large-block path, early writeback): the bytes are still the held ones.

TEST_F(CliOutputs, AStreamedTimelineOfManyBlocksHasTheHeldBytes) {
  const std::string trace = write("many.csv", many_steps_trace_text());
  for (const std::string mode : {"", "--no-async-scheduling"}) {
    const std::string base =
        cat({"replay ", trace, " --step-time fixed:5 --time-scale 20 --no-progress ", mode});
    const std::string streamed = (dir_ / "streamed.csv").string();
    const std::string held = (dir_ / "held.csv").string();
    ASSERT_EQ(run_kvsim(cat({base, " --timeline ", streamed}), ">/dev/null 2>&1").status, 0);
    ASSERT_EQ(run_kvsim(cat({base, " --timeline ", held, " --metrics ", (dir_ / "m.txt").string()}),
                        ">/dev/null 2>&1")
                  .status,
              0);
    const std::string want = slurp(held);
    EXPECT_GT(want.size(), size_t{6} << 20);  // early writeback every 4 MiB
    EXPECT_EQ(slurp(streamed), want) << mode;
    EXPECT_EQ(temporaries(), 0);
  }
}

// A streamed timeline lands only when the whole command succeeds: a replay stopped by a signal
// after rows were written (SighupStopsAReplayLikeSigterm) or one that fails at the end leaves
// the previous file and no temporary.
TEST_F(CliOutputs, AStreamedTimelineOfAFailedReplayChangesNothing) {
  const std::string trace = write("long.csv", long_trace_text());
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const std::string out = write("t.csv", "previous timeline\n");
  // --json /dev/full is written in place after the replay and fails (ENOSPC) once the timeline's
  // rows are all in its temporary file.
  const CliRun r = run_kvsim(cat({"replay ", trace, " --step-time fixed:5 --no-progress",
                                  " --json /dev/full --timeline ", out}));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--json /dev/full: cannot write: No space left on device"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(slurp(out), "previous timeline\n");
  EXPECT_EQ(temporaries(), 0);
}

// The per-request rows, streamed into their temporary file as the records become final: the
// same guarantee.
TEST_F(CliOutputs, StreamedRequestsOfAFailedReplayChangeNothing) {
  const std::string trace = write("long.csv", long_trace_text());
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const std::string out = write("r.csv", "previous requests\n");
  const CliRun r = run_kvsim(cat({"replay ", trace, " --step-time fixed:5 --no-progress",
                                  " --json /dev/full --requests ", out}));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--json /dev/full: cannot write: No space left on device"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(slurp(out), "previous requests\n");
  EXPECT_EQ(temporaries(), 0);
  // And a replay that succeeds writes every request's row, in trace order.
  const CliRun ok =
      run_kvsim(cat({"replay ", trace, " --step-time fixed:5 --no-progress --requests ", out}));
  ASSERT_EQ(ok.status, 0) << ok.out;
  std::istringstream rows(slurp(out));
  std::string line;
  std::getline(rows, line);
  EXPECT_EQ(line.rfind("request_id,", 0), 0u) << line;
  int64_t want = 0;
  while (std::getline(rows, line)) {
    EXPECT_EQ(line.substr(0, line.find(',')), std::to_string(want)) << line;
    ++want;
  }
  EXPECT_GT(want, 1);
}

// --- a path that is stdout counts as "-" ---------------------------------------------------

TEST_F(CliOutputs, DevStdoutIsADuplicateOfDash) {
  const CliRun r = run_kvsim(replay("--json /dev/stdout --timeline -"));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--json /dev/stdout and --timeline - both write to stdout"),
            std::string::npos)
      << r.out;
  // Alone it is stdout: the JSON replaces the report there instead of being mixed into it.
  const CliRun alone = run_kvsim(replay("--json /dev/stdout"), "2>/dev/null");
  EXPECT_EQ(alone.status, 0) << alone.out;
  EXPECT_EQ(alone.out.rfind("{", 0), 0u) << alone.out;
}

// --- traces that are pipes or FIFOs -------------------------------------------------------

TEST_F(CliOutputs, ATraceOnAPipeIsReadOnce) {
  const CliRun r = run_sh(cat({"cat ", trace_, " | ", quoted_kvsim(),
                               "replay /dev/stdin --step-time fixed:5 --no-progress"}));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("kvsim replay: 24 requests"), std::string::npos) << r.out;
  // Process substitution (bash): /dev/fd/N, a pipe too.
  if (std::system("bash -c true >/dev/null 2>&1") == 0) {
    const CliRun b = run_sh(cat({"bash -c \"", quoted_kvsim(), "replay <(cat ", trace_,
                                 ") --step-time fixed:5 --no-progress\""}));
    EXPECT_EQ(b.status, 0) << b.out;
    EXPECT_NE(b.out.find("kvsim replay: 24 requests"), std::string::npos) << b.out;
  }
  // A FIFO with a writer (bounded by timeout: reading it twice would wait for a second writer).
  const std::string fifo = (dir_ / "trace.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const CliRun f = run_sh(cat({"cat ", trace_, " > ", fifo, " & timeout 20 ", quoted_kvsim(),
                               "replay ", fifo, " --step-time fixed:5 --no-progress; wait"}));
  EXPECT_EQ(f.status, 0) << f.out;
  EXPECT_NE(f.out.find("kvsim replay: 24 requests"), std::string::npos) << f.out;
}

// kvsim replay FIFO, stopped by SIGTERM while it waits in open() (no writer yet) or in read()
// (a writer that sent a header and stalls): it must answer within a second.
class CliFifoSignal : public CliOutputs {
 protected:
  void expect_prompt_exit(bool with_writer) {
    const std::string fifo = (dir_ / "trace.fifo").string();
    const std::string err = (dir_ / "stderr.txt").string();
    const std::string out = write("r.json", "previous json\n");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(e, STDERR_FILENO);
      ::execl(KVSIM_BINARY, KVSIM_BINARY, "replay", fifo.c_str(), "--step-time", "fixed:5",
              "--no-progress", "--json", out.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int writer = -1;
    if (with_writer) {
      writer = ::open(fifo.c_str(), O_WRONLY);  // returns once kvsim opened its end
      ASSERT_GE(writer, 0);
      const char header[] = "arrived_at,num_prefill_tokens,num_decode_tokens\n";
      ASSERT_EQ(::write(writer, header, sizeof header - 1),
                static_cast<ssize_t>(sizeof header - 1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // kvsim is blocked by now
    ::kill(pid, SIGTERM);
    int status = 0;
    pid_t done = 0;
    const auto start = std::chrono::steady_clock::now();
    while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() - start < std::chrono::seconds(1)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (done == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
    if (writer >= 0) ::close(writer);
    ASSERT_EQ(done, pid) << "still blocked a second after SIGTERM";
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
    EXPECT_NE(slurp(err).find("kvsim: error: interrupted by SIGTERM"), std::string::npos)
        << slurp(err);
    EXPECT_EQ(slurp(out), "previous json\n");
    EXPECT_EQ(temporaries(), 0);
  }
};

TEST_F(CliFifoSignal, SigtermEndsAnOpenBlockedOnAFifo) {
  expect_prompt_exit(/*with_writer=*/false);
}

TEST_F(CliFifoSignal, SigtermEndsAReadBlockedOnAFifo) {
  expect_prompt_exit(/*with_writer=*/true);
}

}  // namespace
