// What kvsim guarantees about the user's files (docs/files.md), end to end: an output that is an
// input is refused (by file identity, through symlinks); outputs appear whole or not at all (a
// failed run, a full disk, SIGTERM/SIGINT leave the previous file and no temporary; SIGKILL the
// previous file); the cause of a write failure is named; a trace written by gen and cut short is
// refused.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cli_files_fixture.h"
#include "cli_run.h"

namespace {

using kvsim_cli_test::cat;
using kvsim_cli_test::CliRun;
using kvsim_cli_test::run_kvsim;
using kvsim_cli_test::slurp;
namespace fs = std::filesystem;

class CliFiles : public kvsim_cli_test::CliFilesFixture {
 protected:
  void expect_refused(const std::string& args, const std::string& message) {
    SCOPED_TRACE(args);
    const CliRun r = run_kvsim(args);
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << r.out;
    EXPECT_EQ(slurp(trace_), trace_text()) << "the input was changed";
    EXPECT_EQ(temporaries(), 0);
  }
};

TEST_F(CliFiles, ReplayRefusesEveryOutputThatIsTheTrace) {
  for (const char* flag : {"--json", "--timeline", "--requests"}) {
    expect_refused(replay(cat({flag, " ", trace_})),
                   cat({flag, " ", trace_, ": is the same file as the trace"}));
  }
  // Through a symlink, and through another spelling of the path.
  fs::create_symlink(trace_, dir_ / "link.json");
  expect_refused(replay(cat({"--json ", (dir_ / "link.json").string()})),
                 "refusing to overwrite an input");
  expect_refused(replay(cat({"--json ", (dir_ / "." / "trace.csv").string()})),
                 "refusing to overwrite an input");
}

TEST_F(CliFiles, ReplayRefusesTheConfigAsOutput) {
  const std::string config =
      write("config.json",
            R"({"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "hidden_size": 256, "max_position_embeddings": 4096})");
  const CliRun r = run_kvsim(replay(cat({"--config ", config, " --json ", config})));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("is the same file as --config"), std::string::npos) << r.out;
  EXPECT_NE(slurp(config).find("num_hidden_layers"), std::string::npos);
}

TEST_F(CliFiles, SweepRefusesCsvThatIsTheTraceAndMergeOutputThatIsAShard) {
  expect_refused(
      cat({"sweep ", trace_, " --model qwen2.5-7b --max-model-len 4096 -q --csv ", trace_}),
      "is the same file as the trace");
  const std::string shard = write("a.csv", "config_index\n");
  fs::create_symlink(shard, dir_ / "alias.csv");
  const CliRun r = run_kvsim(cat({"sweep --merge ", shard, " -o ", (dir_ / "alias.csv").string()}));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("is the same file as the --merge input"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(shard), "config_index\n");
}

TEST_F(CliFiles, GenRefusesToOverwriteItsEmpiricalSource) {
  expect_refused(cat({"gen -q -n 5 --input-len empirical:", trace_, " -o ", trace_}),
                 "is the same file as --input-len's trace");
}

TEST_F(CliFiles, AFailedRunKeepsThePreviousOutputAndLeavesNoTemporary) {
  const std::string csv = write("out.csv", "previous results\n");
  const std::string bad =
      write("bad.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n1,x,2\n");
  const CliRun r =
      run_kvsim(cat({"sweep ", bad, " --model qwen2.5-7b --max-model-len 4096 -q --csv ", csv}));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(slurp(csv), "previous results\n");
  EXPECT_EQ(temporaries(), 0);
}

TEST_F(CliFiles, OutputsAreReplacedWholeThroughSymlinksWithTheirMode) {
  const std::string json = write("real.json", "old\n");
  fs::permissions(json, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  fs::create_symlink(json, dir_ / "link.json");
  const CliRun r = run_kvsim(replay(cat({"--json ", (dir_ / "link.json").string()})));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.json"));
  EXPECT_EQ(slurp(json).rfind("{", 0), 0u) << slurp(json);
  EXPECT_EQ(fs::status(json).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(temporaries(), 0);
}

TEST_F(CliFiles, AnOutputThatIsADanglingSymlinkIsRefused) {
  // Used to replace the link with a regular file; now refused before the run, link untouched.
  fs::create_symlink(dir_ / "missing.json", dir_ / "dangling.json");
  const std::string link = (dir_ / "dangling.json").string();
  expect_refused(replay(cat({"--json ", link})),
                 cat({"--json ", link, ": is a symlink to a missing file ",
                      (dir_ / "missing.json").string(), "; refusing to write through it"}));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_FALSE(fs::exists(dir_ / "missing.json"));
  // A link loop is refused too, and sweep/gen outputs go through the same check.
  fs::create_symlink(dir_ / "loop.csv", dir_ / "loop.csv");
  const std::string loop = (dir_ / "loop.csv").string();
  expect_refused(cat({"gen -n 2 -o ", loop}),
                 cat({"--output ", loop, ": is a symlink that cannot be followed"}));
  EXPECT_TRUE(fs::is_symlink(loop));
}

TEST_F(CliFiles, AWriteErrorNamesTheCauseAndThePath) {
  const CliRun r = run_kvsim(replay("--json /dev/full"));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--json /dev/full: cannot write: No space left on device"),
            std::string::npos)
      << r.out;
}

// A real full file system (a 64 KiB tmpfs; needs the privilege to mount, else skipped; /dev/full
// above covers the message without it).
TEST_F(CliFiles, AFullDiskLeavesThePreviousOutputAndNoTemporary) {
  const fs::path small = dir_ / "small";
  fs::create_directories(small);
  if (::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=64k") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here";
  }
  struct Unmount {
    std::string p;
    ~Unmount() { ::umount(p.c_str()); }
  } unmount{small.string()};
  const std::string out = (small / "timeline.csv").string();
  std::ofstream(out) << "previous timeline\n";
  const std::string big = write("big.csv", [] {
    std::string t = "arrived_at,num_prefill_tokens,num_decode_tokens\n";
    for (int i = 0; i < 400; ++i) t += cat({std::to_string(i), ",100,50\n"});
    return t;
  }());
  const CliRun r =
      run_kvsim(cat({"replay ", big, " --step-time fixed:5 --no-progress --timeline ", out}));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find(cat({"--timeline ", out, ": cannot write: No space left on device"})),
            std::string::npos)
      << r.out;
  EXPECT_EQ(slurp(out), "previous timeline\n");
  EXPECT_EQ(temporaries(), 0);
}

// SIGTERM and SIGINT stop a replay or a sweep cleanly: exit 128 + signal, the previous output
// intact, no temporary. SIGKILL cannot be caught: the previous output is still intact (outputs are
// renamed into place only when complete) and the killed process's temporary is left behind.
// The four processes run at once so that the slow part (reading a 400k-request trace under the
// sanitizers) is paid once.
TEST_F(CliFiles, SignalsStopReplaysAndSweepsCleanly) {
  const std::string big = (dir_ / "big.jsonl").string();
  ASSERT_EQ(run_kvsim(cat({"gen -q -n 400000 --rate 2000 -o ", big})).status, 0);
  struct Child {
    const char* command;
    int signal;
    std::string out;
    pid_t pid = -1;
  };
  std::vector<Child> children = {{"replay", SIGTERM, {}},
                                 {"replay", SIGINT, {}},
                                 {"replay", SIGKILL, {}},
                                 {"sweep", SIGTERM, {}}};
  for (size_t i = 0; i < children.size(); ++i) {
    Child& c = children[i];
    c.out = write(cat({"out", std::to_string(i), ".csv"}), "previous output\n");
    c.pid = ::fork();
    ASSERT_GE(c.pid, 0);
    if (c.pid == 0) {
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, STDOUT_FILENO);
      ::dup2(null, STDERR_FILENO);
      if (std::string(c.command) == "replay") {
        ::execl(KVSIM_BINARY, KVSIM_BINARY, "replay", big.c_str(), "--step-time", "fixed:5",
                "--no-progress", "--timeline", c.out.c_str(), static_cast<char*>(nullptr));
      } else {
        ::execl(KVSIM_BINARY, KVSIM_BINARY, "sweep", big.c_str(), "--model", "qwen2.5-7b",
                "--max-model-len", "4096", "--step-time", "fixed:5", "-q", "--csv", c.out.c_str(),
                static_cast<char*>(nullptr));
      }
      ::_exit(127);
    }
  }
  // Wait until every temporary exists (outputs are opened before the work starts; reading the
  // trace takes a while under the sanitizers).
  const int n = static_cast<int>(children.size());
  for (int i = 0; i < 24000 && temporaries() < n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(temporaries(), n);
  for (const Child& c : children) ::kill(c.pid, c.signal);
  for (const Child& c : children) {
    SCOPED_TRACE(cat({c.command, " ", strsignal(c.signal)}));
    int status = 0;
    ASSERT_EQ(::waitpid(c.pid, &status, 0), c.pid);
    if (c.signal == SIGKILL) {
      ASSERT_TRUE(WIFSIGNALED(status));
      EXPECT_EQ(WTERMSIG(status), SIGKILL);
    } else {
      ASSERT_TRUE(WIFEXITED(status));
      EXPECT_EQ(WEXITSTATUS(status), 128 + c.signal);
    }
    EXPECT_EQ(slurp(c.out), "previous output\n");
  }
  EXPECT_EQ(temporaries(), 1) << "only the SIGKILLed replay's temporary may remain";
}

TEST_F(CliFiles, AGenTraceCutShortIsRefused) {
  const std::string full = (dir_ / "full.jsonl").string();
  ASSERT_EQ(run_kvsim(cat({"gen -q -n 100 --seed 4 -o ", full})).status, 0);
  const std::string text = slurp(full);
  ASSERT_EQ(text.rfind("{\"kvsim_trace\": 1, \"records\": 100}\n", 0), 0u) << text.substr(0, 80);
  // Cut at a line boundary, as a killed writer or an interrupted copy would.
  size_t at = 0;
  for (int i = 0; i < 51; ++i) at = text.find('\n', at) + 1;
  const std::string cut = write("cut.jsonl", text.substr(0, at));
  const CliRun r = run_kvsim(cat({"replay ", cut, " --step-time fixed:5 --no-progress"}));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("the header on line 1 declares 100 records and the file holds 50: cut "
                       "short or damaged"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(
      run_kvsim(cat({"replay ", full, " --step-time fixed:5 --no-progress"}), "2>/dev/null").status,
      0);
}

}  // namespace
