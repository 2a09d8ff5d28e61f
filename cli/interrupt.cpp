#include "interrupt.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>

namespace kvsim::cli {
namespace {

std::atomic<int> g_signal{0};

// Fixed storage: the handler may read it at any time, so no allocation and no reallocation.
// A slot is published by storing its `used` flag after the path is complete.
constexpr size_t kMaxPath = 4096;
struct TempSlot {
  std::atomic<bool> used{false};
  char path[kMaxPath] = {};
};
TempSlot g_temps[kMaxTemporaries];

extern "C" void on_signal(int sig) {
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, sig)) return;  // first: the CLI polls the flag
  // Second signal: the user does not want to wait for the next poll.
  for (TempSlot& t : g_temps) {
    if (t.used.load()) ::unlink(t.path);
  }
  static const char msg[] = "kvsim: interrupted again; temporary outputs removed\n";
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
  ::_exit(128 + sig);
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  // No SA_RESTART: a blocking open or read (a FIFO trace without a writer, a stalled pipe)
  // returns EINTR, so the signal is answered at once instead of at the next poll, never.
  sa.sa_flags = 0;
  // A closed terminal (SIGHUP) is a request to stop like any other.
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  // A closed pipe or a file size limit would kill the process silently, leaving temporaries:
  // ignored, the write fails with EPIPE / EFBIG and the write error path reports and cleans up.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  for (const int sig : {SIGPIPE, SIGXFSZ}) sigaction(sig, &ignore, nullptr);
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

int interrupt_signal() {
  return g_signal.load();
}

Interrupted::Interrupted(int signal)
    : std::runtime_error(std::string("interrupted by ") + signal_name(signal) +
                         "; no output file was written or changed"),
      signal_(signal) {}

void throw_if_interrupted() {
  if (const int s = g_signal.load(); s != 0) throw Interrupted(s);
}

int register_temporary(const std::string& path) {
  if (path.size() >= kMaxPath) return -1;
  for (int i = 0; i < kMaxTemporaries; ++i) {
    TempSlot& t = g_temps[i];
    if (t.used.load()) continue;
    std::memcpy(t.path, path.c_str(), path.size() + 1);
    t.used.store(true);
    return i;
  }
  return -1;
}

void unregister_temporary(int slot) {
  if (slot >= 0 && slot < kMaxTemporaries) g_temps[slot].used.store(false);
}

}  // namespace kvsim::cli
