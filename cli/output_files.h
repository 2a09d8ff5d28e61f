// The output files of one command. What they guarantee (docs/files.md):
// - No output may be an input: an output path that resolves to the same file (device and inode,
//   symlinks followed) as any registered input is refused before anything is opened.
// - Two outputs may not name the same file, and at most one may be "-" (stdout). A path that
//   names the file stdout is (/dev/stdout, or the file stdout is redirected to; device and inode
//   of fstat(1)) counts as "-": it is written to stdout, and a second one is refused.
// - A regular-file output is written to a temporary file in the destination's directory
//   (".NAME.kvsim-XXXXXX"), flushed and fsync'ed, and renamed over the destination only by
//   commit_all(), after every output of the command is complete. Until then the destination is
//   untouched; destroying an OutputFiles that was not committed (an error, an interrupt) removes
//   the temporaries. A path that names an existing non-regular file (/dev/null, a FIFO, a
//   terminal) is written in place, since it cannot be replaced by a rename.
// - A failed write names the flag, the path and the cause (strerror, e.g. "No space left on
//   device"; "Broken pipe" and "File too large" too, since SIGPIPE/SIGXFSZ are ignored).
// - A path that is a symlink to a missing file (or a link loop) is refused by add(): writing
//   through it would create a file at the link's far end or replace the link, neither clearly
//   meant.
// Paths are opened by open_all(), before the (possibly long) run, so a bad path fails in a second.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace kvsim::cli {

class OutputFiles {
 public:
  OutputFiles();
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  ~OutputFiles();

  // An input of the command (`what` names it in messages, e.g. "the trace" or "--config");
  // empty and "-" are ignored.
  void add_input(const std::string& what, const std::string& path);

  // Registers an output; an empty path means "not requested" and is ignored. Throws
  // std::invalid_argument naming both flags on a duplicate path or a second "-".
  void add(const std::string& flag, const std::string& path);

  // Throws std::invalid_argument when an output is the same file as an input (call it before
  // reading the inputs, to refuse at once; open_all() calls it again).
  void refuse_inputs() const;

  // Refuses outputs that are inputs (std::invalid_argument), then creates the temporary files.
  // Throws std::runtime_error naming the flag and path when one cannot be created.
  void open_all();

  bool requested(const std::string& flag) const { return find(flag) != nullptr; }
  // True when some output goes to stdout ("-").
  bool uses_stdout() const;

  // The stream for `flag` (for stdout, a buffer of its own over fd 1); the flag must be
  // registered and opened.
  std::ostream& stream(const std::string& flag);

  // Whether `flag`'s bytes go to a temporary file that only commit_all() renames over the
  // destination (a regular file or a new path), so nothing written before a failure is ever
  // seen: false for stdout and for a file written in place (/dev/null, a FIFO). Such an output
  // may be written while the run goes (replay's streamed --timeline). Needs open_all().
  bool renamed_at_commit(const std::string& flag) const;

  // The path `flag`'s bytes go to until commit_all(): the temporary file, or the destination
  // when it is written in place. For an output another program writes (size --plot's script);
  // std::logic_error for stdout or an output not opened.
  const std::string& write_path(const std::string& flag);

  // Flushes `flag`'s stream to disk (fsync) and closes it; throws std::runtime_error naming the
  // flag, the path and the cause if any write failed (the temporary is then removed).
  void finish(const std::string& flag);

  // Renames every finished temporary over its destination. Call once, when the command's work
  // succeeded; outputs not finish()ed are an error (std::logic_error).
  void commit_all();

  struct Entry;

 private:
  const Entry* find(const std::string& flag) const;
  Entry& get(const std::string& flag);
  void discard(Entry& e);
  std::vector<std::unique_ptr<Entry>> entries_;
  struct Input {
    std::string what;
    std::string path;
  };
  std::vector<Input> inputs_;
};

}  // namespace kvsim::cli
