// `--plot FILE`: the plot scripts run as child processes (plot_output.h).
#include "plot_output.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/core.h>

#include "interrupt.h"

extern char** environ;

namespace kvsim::cli {
namespace {

namespace fs = std::filesystem;

// Debian's interpreter, where python3-matplotlib installs (tools/install-deps.sh).
constexpr const char* kSystemPython = "/usr/bin/python3";

// tools/SCRIPT: next to this source file's directory (the tree kvsim was built from), unless
// KVSIM_TOOLS_DIR names another.
fs::path plot_script(const std::string& script) {
  if (const char* dir = std::getenv("KVSIM_TOOLS_DIR"); dir != nullptr && *dir != '\0') {
    return fs::path(dir) / script;
  }
  return fs::path(__FILE__).parent_path().parent_path() / "tools" / script;
}

// The format matplotlib is told to write: the destination's extension (the temporary's name
// ends in ".kvsim-XXXXXX", so the script cannot infer it), png when there is none.
std::string plot_format(const std::string& destination) {
  std::string ext = fs::path(destination).extension().string();
  if (ext.size() <= 1) return "png";
  ext.erase(0, 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

// Runs argv (no shell; PATH searched) and waits. Its stdout (a script's "wrote TEMPORARY" line)
// goes to /dev/null: kvsim's stdout may carry another output. Its stderr (a script's error) is
// kvsim's, or /dev/null too when `quiet`. kvsim ignores SIGPIPE/SIGXFSZ (interrupt.h); the child
// gets the defaults back.
// Returns the wait status, or nullopt when the program cannot be started.
std::optional<int> run_child(std::vector<std::string> args, bool quiet) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  if (quiet) posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGXFSZ);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (spawned != 0) return std::nullopt;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("--plot: waiting for the plot script failed");
  }
  throw_if_interrupted();  // a Ctrl-C reached the child too: report the signal, not its failure
  return status;
}

// `name`'s path on PATH (as posix_spawnp would find it), or empty.
std::string on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    const std::string candidate = dir + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  return {};
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return fs::equivalent(a, b, ec);
}

// The interpreter that runs the plot scripts (plot_output.h), found once per process.
std::string plot_python(const std::string& plot_path) {
  if (const char* env = std::getenv("KVSIM_PYTHON"); env != nullptr && *env != '\0') return env;
  static std::optional<std::string> found;
  if (found) return *found;
  std::vector<std::string> tried;
  const std::string first = on_path("python3");
  struct Candidate {
    std::string program;
    std::string label;
  };
  std::vector<Candidate> candidates;
  if (first.empty()) {
    tried.push_back("python3: not on PATH");
  } else {
    candidates.push_back({first, fmt::format("python3 on PATH ({})", first)});
  }
  if (first.empty() || !same_file(first, kSystemPython)) {
    candidates.push_back({kSystemPython, kSystemPython});
  }
  for (const Candidate& c : candidates) {
    struct stat st {};
    if (c.program == kSystemPython && ::stat(kSystemPython, &st) != 0) {
      tried.push_back(fmt::format("{}: not found", c.label));
      continue;
    }
    const std::optional<int> status = run_child({c.program, "-c", "import matplotlib"}, true);
    if (!status) {
      tried.push_back(fmt::format("{}: cannot be run", c.label));
    } else if (WIFEXITED(*status) && WEXITSTATUS(*status) == 0) {
      found = c.program;
      return c.program;
    } else {
      tried.push_back(fmt::format("{}: no matplotlib", c.label));
    }
  }
  std::string list;
  for (const std::string& t : tried) list += (list.empty() ? "" : "; ") + t;
  throw std::runtime_error(fmt::format(
      "--plot {}: no Python with matplotlib found (tried {}); apt-get install python3-matplotlib "
      "(Debian's {}) or set KVSIM_PYTHON to an interpreter that has matplotlib",
      plot_path, list, kSystemPython));
}

}  // namespace

void add_plot_output(OutputFiles& outputs, const std::string& plot_path) {
  if (plot_path == "-") {
    throw std::invalid_argument("--plot -: a plot cannot go to stdout; name a .png or .svg file");
  }
  outputs.add("--plot", plot_path);
}

PlotInputs::~PlotInputs() {
  for (const File& f : files_) {
    std::remove(f.path.c_str());
    unregister_temporary(f.slot);
  }
}

std::string PlotInputs::add(const std::function<void(std::ostream&)>& write) {
  std::string tmpl = (fs::temp_directory_path() / "kvsim-plot-XXXXXX").string();
  const int fd = mkstemp(tmpl.data());
  if (fd < 0) {
    throw std::runtime_error(fmt::format("--plot: cannot create a temporary file in {}: {}",
                                         fs::temp_directory_path().string(), std::strerror(errno)));
  }
  close(fd);
  files_.push_back({tmpl, register_temporary(tmpl)});
  std::ofstream f(tmpl, std::ios::binary | std::ios::trunc);
  write(f);
  if (!f.flush()) {
    throw std::runtime_error(fmt::format("--plot: cannot write the temporary file {}", tmpl));
  }
  return tmpl;
}

void draw_plot(OutputFiles& outputs, const std::string& plot_path, const std::string& script,
               const std::vector<std::string>& args) {
  const fs::path script_path = plot_script(script);
  if (!fs::exists(script_path)) {
    throw std::runtime_error(
        fmt::format("--plot: {} not found (set KVSIM_TOOLS_DIR to the kvsim source tree's tools/)",
                    script_path.string()));
  }
  const std::string python = plot_python(plot_path);
  std::vector<std::string> argv = {python, script_path.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"-o", outputs.write_path("--plot"), "--format", plot_format(plot_path)});
  const std::optional<int> status = run_child(argv, false);
  if (!status) {
    throw std::runtime_error(
        fmt::format("--plot {}: cannot run {} (set KVSIM_PYTHON)", plot_path, python));
  }
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    const std::string how = WIFEXITED(*status) ? fmt::format("exit status {}", WEXITSTATUS(*status))
                                               : "killed by a signal";
    throw std::runtime_error(fmt::format("--plot {}: {} {} failed ({}; its message is above)",
                                         plot_path, python, script_path.string(), how));
  }
  outputs.finish("--plot");
}

}  // namespace kvsim::cli
