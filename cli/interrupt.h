// SIGINT/SIGTERM/SIGHUP handling for the CLI. The library never exits: the first signal only sets a
// flag, which the CLI polls where a long loop reports progress (replay's progress callback, the
// sweep runner before each grid point) and between phases; throw_if_interrupted() then throws
// Interrupted, the stack unwinds, OutputFiles removes its temporary files and main() exits with
// 128 + the signal number. A second signal does not wait for a poll: the handler removes the
// registered temporaries itself (unlink is async-signal-safe) and _exits. SIGKILL cannot be
// caught: it can leave a ".NAME.kvsim-XXXXXX" temporary behind, never a damaged output.
// SIGPIPE and SIGXFSZ are ignored, so a closed pipe or `ulimit -f` is a write error (EPIPE,
// EFBIG) that OutputFiles reports, naming the flag and path, and cleans up.
#pragma once

#include <stdexcept>
#include <string>

namespace kvsim::cli {

// Installs the handlers (once, from main()).
void install_interrupt_handlers();

// The signal received (SIGINT, SIGTERM, SIGHUP), or 0.
int interrupt_signal();

// "SIGINT", "SIGTERM", "SIGHUP", for messages.
const char* signal_name(int signal);

// Thrown by throw_if_interrupted(); main() turns it into exit status 128 + signal.
class Interrupted : public std::runtime_error {
 public:
  explicit Interrupted(int signal);
  int signal() const { return signal_; }

 private:
  int signal_;
};

// Throws Interrupted when a signal has arrived.
void throw_if_interrupted();

// Temporary output files the second signal removes. register returns a slot for unregister;
// at most kMaxTemporaries are tracked at once (further ones are still removed on unwinding).
inline constexpr int kMaxTemporaries = 16;
int register_temporary(const std::string& path);
void unregister_temporary(int slot);

}  // namespace kvsim::cli
