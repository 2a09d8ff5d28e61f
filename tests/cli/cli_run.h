// Runs the built `kvsim` binary (KVSIM_BINARY) through the shell for the end-to-end CLI tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace kvsim_cli_test {

struct CliRun {
  int status = -1;  // exit status; -1 when the process did not exit normally or could not start
  std::string out;  // what `redirect` sends to the pipe (by default stdout and stderr)
};

// `kvsim <args> <redirect>`; `redirect` picks what is captured ("2>&1": both streams,
// "2>/dev/null": stdout only). `args` is shell text: quote paths that need it.
inline CliRun run_kvsim(const std::string& args, const std::string& redirect = "2>&1") {
  CliRun r;
  const std::string cmd = std::string("'") + KVSIM_BINARY + "' " + args + " " + redirect;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace kvsim_cli_test
