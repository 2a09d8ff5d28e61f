// Runs the built `kvsim` binary (KVSIM_BINARY) through the shell for the end-to-end CLI tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>

namespace kvsim_cli_test {

struct CliRun {
  int status = -1;  // exit status; -1 when the process did not exit normally or could not start
  std::string out;  // what `redirect` sends to the pipe (by default stdout and stderr)
};

// `kvsim <args> <redirect>`; `redirect` picks what is captured ("2>&1": both streams,
// "2>/dev/null": stdout only). `args` is shell text: quote paths that need it.
inline CliRun run_kvsim(const std::string& args, const std::string& redirect = "2>&1");

// Any shell command line; captures its stdout.
inline CliRun run_shell(const std::string& cmd) {
  CliRun r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline CliRun run_kvsim(const std::string& args, const std::string& redirect) {
  return run_shell(std::string("'") + KVSIM_BINARY + "' " + args + " " + redirect);
}

// Concatenation by append: GCC 12 at -O3 warns (-Wrestrict, a false positive) about
// `"literal" + std::string` chains.
inline std::string cat(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (std::string_view p : parts) s.append(p);
  return s;
}

// The whole file, bytes as they are ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace kvsim_cli_test
