// The output files of one command, opened before the (possibly long) run so that a bad path
// fails in a second, not after the simulation. Rejects two flags naming the same file (one would
// silently overwrite the other) and more than one "-" (their contents would interleave on
// stdout).
#pragma once

#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace kvsim::cli {

class OutputFiles {
 public:
  // Registers an output; an empty path means "not requested" and is ignored. Throws
  // std::invalid_argument naming both flags on a duplicate path or a second "-".
  void add(const std::string& flag, const std::string& path);

  // Opens (creates/truncates) every registered file. Throws std::runtime_error naming the flag
  // and path when one cannot be opened for writing.
  void open_all();

  bool requested(const std::string& flag) const { return find(flag) != nullptr; }
  // True when some output goes to stdout ("-").
  bool uses_stdout() const;

  // The stream for `flag` (std::cout for "-"); the flag must be registered and opened.
  std::ostream& stream(const std::string& flag);

  // Flushes and closes `flag`'s stream; throws std::runtime_error naming the flag and path if
  // any write failed.
  void finish(const std::string& flag);

 private:
  struct Entry {
    std::string flag;
    std::string path;
    std::string key;  // normalized path, for duplicate detection
    std::unique_ptr<std::ofstream> file;
  };
  const Entry* find(const std::string& flag) const;
  Entry& get(const std::string& flag);
  std::vector<Entry> entries_;
};

}  // namespace kvsim::cli
