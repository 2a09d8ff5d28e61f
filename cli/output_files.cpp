#include "output_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <streambuf>

#include <fmt/core.h>

#include "interrupt.h"

namespace kvsim::cli {
namespace fs = std::filesystem;
namespace {

// A streambuf over a file descriptor that keeps the errno of the first failed write, so the
// message can say why ("No space left on device") instead of only that a stream went bad.
class FdBuf : public std::streambuf {
 public:
  // early_writeback: a temporary file that finish() will fsync; its data is handed to the disk
  // as it is written (below), so that the final fsync waits for little.
  FdBuf(int fd, bool early_writeback) : fd_(fd), early_writeback_(early_writeback) {
    setp(buf_, buf_ + sizeof buf_);
  }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }
  // A block at least as large as the buffer (the CSV writers' 256 KiB chunks) is written
  // straight from the caller's memory after what is buffered, not copied through the buffer
  // (still in write() calls of at most kMaxWrite).
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (n < static_cast<std::streamsize>(sizeof buf_)) return std::streambuf::xsputn(s, n);
    if (!drain() || !write_all(s, static_cast<size_t>(n))) return 0;
    return n;
  }

 private:
  bool drain() {
    if (!write_all(pbase(), static_cast<size_t>(pptr() - pbase()))) return false;
    setp(buf_, buf_ + sizeof buf_);
    return true;
  }
  bool write_all(const char* p, size_t size) {
    if (error_ != 0) return false;
    const char* const end = p + size;
    while (p < end) {
      // Up to the next multiple of kMaxWrite in the file: every write but a call's last starts
      // and ends on such an offset.
      const size_t to_boundary = kMaxWrite - static_cast<size_t>(written_) % kMaxWrite;
      const ssize_t n = ::write(fd_, p, std::min(static_cast<size_t>(end - p), to_boundary));
      if (n < 0) {
        // A signal during a blocked write (a FIFO or pipe nobody reads) ends it when it is an
        // interrupt (the handlers do not restart system calls), else the write is retried.
        if (errno == EINTR && interrupt_signal() == 0) continue;
        error_ = errno;
        return false;
      }
      p += n;
      written_ += n;
    }
#if defined(__linux__)
    // Every kWritebackBytes, start the disk write of what was written since (asynchronous; a
    // hint only: any error is fsync's to report). A 30 MB timeline's fsync otherwise waits
    // ~20 ms for all of it at the end (issue 27).
    // The range ends on a multiple of kMaxWrite: the partly written block after it is left to
    // the next range, not put under writeback while it is still being filled.
    const off_t aligned = written_ - written_ % static_cast<off_t>(kMaxWrite);
    if (early_writeback_ && aligned - writeback_from_ >= kWritebackBytes) {
      (void)::sync_file_range(fd_, writeback_from_, aligned - writeback_from_,
                              SYNC_FILE_RANGE_WRITE);
      writeback_from_ = aligned;
    }
#endif
    return true;
  }
  // At most 64 KiB per write(), and on 64 KiB boundaries of the file: on this project's Linux
  // 6.18 VMs (ext4), a 30 MB timeline written in 64 KiB calls at whatever offsets the rows left
  // cost about 3.5 ms more CPU (system time, fsync included) than the same calls on 64 KiB
  // boundaries, or 256 KiB and 1 MiB ones (seventeenth pass); an earlier VM had 256 KiB and 1 MiB
  // calls at 5-8x the kernel time of 64 KiB ones (issue 27, bench/RESULTS.md). The bytes are the
  // same either way.
  static constexpr size_t kMaxWrite = size_t{1} << 16;
  static constexpr off_t kWritebackBytes = off_t{4} << 20;
  int fd_;
  bool early_writeback_;
  off_t written_ = 0;
  off_t writeback_from_ = 0;
  int error_ = 0;
  char buf_[kMaxWrite];
};

struct FileId {
  dev_t dev;
  ino_t ino;
  bool operator==(const FileId&) const = default;
};

// The identity of the file a path names, symlinks followed; nullopt when it does not exist.
std::optional<FileId> file_id(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

// Whether a path names the file stdout is (/dev/stdout, /proc/self/fd/1, the file stdout was
// redirected to): writing it by name as well as through "-" would interleave or lose one.
bool is_stdout(const std::string& path) {
  struct stat out {};
  if (::fstat(STDOUT_FILENO, &out) != 0) return false;
  return file_id(path) == FileId{out.st_dev, out.st_ino};
}

mode_t current_umask() {
  const mode_t m = ::umask(0);
  ::umask(m);
  return m;
}

// A symlink whose target does not exist (or cannot be followed) is refused: writing "through"
// it would either create a file at the link's far end or replace the link with a regular file,
// and neither is obviously what the user meant.
void refuse_dangling_symlink(const std::string& flag, const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return;
  if (::stat(path.c_str(), &st) == 0) return;
  const int err = errno;
  std::error_code ec;
  const std::string target = fs::read_symlink(path, ec).string();
  if (err == ENOENT) {
    throw std::invalid_argument(
        fmt::format("{} {}: is a symlink to a missing file {}; refusing to write through it", flag,
                    path, ec ? std::string("(unreadable link)") : target));
  }
  throw std::invalid_argument(
      fmt::format("{} {}: is a symlink that cannot be followed ({}); refusing to write through it",
                  flag, path, std::strerror(err)));
}

}  // namespace

struct OutputFiles::Entry {
  std::string flag;
  std::string path;         // as given
  std::string key;          // normalized path, for duplicate detection of files not yet there
  std::string destination;  // path renamed over (symlinks resolved)
  std::string temp;         // temporary path; empty when written in place or to stdout
  bool to_stdout = false;   // "-", or a path that names stdout's file: written to fd 1
  int temp_slot = -1;       // interrupt.h registration
  int fd = -1;
  std::unique_ptr<FdBuf> buf;
  std::unique_ptr<std::ostream> stream;
  bool finished = false;
};

OutputFiles::OutputFiles() = default;

OutputFiles::~OutputFiles() {
  for (auto& e : entries_) discard(*e);
}

void OutputFiles::discard(Entry& e) {
  e.stream.reset();
  e.buf.reset();
  if (e.fd >= 0 && !e.to_stdout) ::close(e.fd);
  e.fd = -1;
  if (!e.temp.empty()) ::unlink(e.temp.c_str());
  unregister_temporary(e.temp_slot);
  e.temp_slot = -1;
  e.temp.clear();
}

void OutputFiles::add_input(const std::string& what, const std::string& path) {
  if (path.empty() || path == "-") return;
  inputs_.push_back({what, path});
}

void OutputFiles::add(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  if (path != "-") refuse_dangling_symlink(flag, path);
  std::string key = path;
  if (path != "-") {
    std::error_code ec;
    const fs::path canon = fs::weakly_canonical(fs::absolute(path), ec);
    if (!ec) key = canon.string();
  }
  const std::optional<FileId> id = path == "-" ? std::nullopt : file_id(path);
  const bool to_stdout = path == "-" || is_stdout(path);
  for (const auto& e : entries_) {
    if (to_stdout && e->to_stdout) {
      throw std::invalid_argument(
          fmt::format("{} {} and {} {} both write to stdout; give at most one '-'", e->flag,
                      e->path, flag, path));
    }
    if (e->key == key || (id && e->path != "-" && file_id(e->path) == id)) {
      throw std::invalid_argument(
          fmt::format("{} and {} name the same file '{}'", e->flag, flag, path));
    }
  }
  auto e = std::make_unique<Entry>();
  e->flag = flag;
  e->path = path;
  e->key = key;
  e->to_stdout = to_stdout;
  entries_.push_back(std::move(e));
}

void OutputFiles::refuse_inputs() const {
  for (const auto& e : entries_) {
    if (e->path == "-") continue;
    const std::optional<FileId> out = file_id(e->path);
    if (!out) continue;
    for (const Input& in : inputs_) {
      if (file_id(in.path) == out) {
        throw std::invalid_argument(fmt::format(
            "{} {}: is the same file as {} '{}'; refusing to overwrite an input (write the "
            "output elsewhere)",
            e->flag, e->path, in.what, in.path));
      }
    }
  }
}

void OutputFiles::open_all() {
  refuse_inputs();  // nothing is created while an output would destroy an input
  for (auto& ep : entries_) {
    Entry& e = *ep;
    if (e.stream) continue;
    if (e.to_stdout) {
      // Its own buffer over fd 1 (std::cout holds nothing of it), so a failed write keeps its
      // errno: EPIPE from `| head` is reported naming the flag.
      std::cout.flush();
      std::fflush(stdout);
      e.fd = STDOUT_FILENO;
      e.buf = std::make_unique<FdBuf>(e.fd, /*early_writeback=*/false);
      e.stream = std::make_unique<std::ostream>(e.buf.get());
      continue;
    }
    struct stat st {};
    const bool exists = ::stat(e.path.c_str(), &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
      throw std::runtime_error(
          fmt::format("{} {}: is a directory, not a file to write", e.flag, e.path));
    }
    if (exists && !S_ISREG(st.st_mode)) {
      // A device, FIFO or socket cannot be replaced by a rename: write to it as it is.
      e.fd = ::open(e.path.c_str(), O_WRONLY | O_CLOEXEC);
      if (e.fd < 0) {
        if (errno == EINTR) throw_if_interrupted();  // a FIFO without a reader, then Ctrl-C
        throw std::runtime_error(fmt::format("{} {}: cannot open for writing: {}", e.flag, e.path,
                                             std::strerror(errno)));
      }
    } else {
      // Through a symlink, replace the file it points to, not the link.
      std::error_code ec;
      const fs::path dest = exists ? fs::canonical(e.path, ec) : fs::path(e.path);
      e.destination = ec ? e.path : dest.string();
      const fs::path d(e.destination);
      const fs::path dir = d.has_parent_path() ? d.parent_path() : fs::path(".");
      std::string name = ".";  // appended piecewise: GCC 12 -O3 warns (-Wrestrict) on a + chain
      name.append(d.filename().string()).append(".kvsim-XXXXXX");
      std::string temp = (dir / name).string();
      e.fd = ::mkostemp(temp.data(), O_CLOEXEC);
      if (e.fd < 0) {
        throw std::runtime_error(
            fmt::format("{} {}: cannot open for writing: {} (creating a temporary file in '{}')",
                        e.flag, e.path, std::strerror(errno), dir.string()));
      }
      e.temp = temp;
      e.temp_slot = register_temporary(temp);
      // The mode a plain open() would give: an existing file's own, else 0666 minus the umask.
      const mode_t mode = exists ? (st.st_mode & 07777) : (0666 & ~current_umask());
      ::fchmod(e.fd, mode);
    }
    e.buf = std::make_unique<FdBuf>(e.fd, /*early_writeback=*/!e.temp.empty());
    e.stream = std::make_unique<std::ostream>(e.buf.get());
  }
}

bool OutputFiles::uses_stdout() const {
  for (const auto& e : entries_) {
    if (e->to_stdout) return true;
  }
  return false;
}

const OutputFiles::Entry* OutputFiles::find(const std::string& flag) const {
  for (const auto& e : entries_) {
    if (e->flag == flag) return e.get();
  }
  return nullptr;
}

OutputFiles::Entry& OutputFiles::get(const std::string& flag) {
  for (auto& e : entries_) {
    if (e->flag == flag) return *e;
  }
  throw std::logic_error("OutputFiles: " + flag + " was not registered");
}

std::ostream& OutputFiles::stream(const std::string& flag) {
  Entry& e = get(flag);
  if (!e.stream) throw std::logic_error("OutputFiles: " + flag + " was not opened");
  return *e.stream;
}

bool OutputFiles::renamed_at_commit(const std::string& flag) const {
  const Entry* e = find(flag);
  if (e == nullptr || !e->stream) {
    throw std::logic_error("OutputFiles: " + flag + " was not registered and opened");
  }
  return !e->temp.empty();
}

const std::string& OutputFiles::write_path(const std::string& flag) {
  Entry& e = get(flag);
  if (e.to_stdout || !e.stream) {
    throw std::logic_error("OutputFiles: " + flag + " has no path to write to");
  }
  return e.temp.empty() ? e.path : e.temp;
}

void OutputFiles::finish(const std::string& flag) {
  Entry& e = get(flag);
  if (!e.stream) throw std::logic_error("OutputFiles: " + flag + " was not opened");
  e.stream->flush();
  int err = e.buf->error();
  if (err == 0 && !*e.stream) err = EIO;
  if (e.to_stdout) {
    // Nothing to sync or close: stdout stays open for main(), which checks it at exit.
    e.stream.reset();
    e.buf.reset();
    e.fd = -1;
    if (err == EINTR) throw_if_interrupted();
    if (err != 0) {
      // Worded as main()'s check of stdout, with the flag and the path added.
      throw std::runtime_error(
          fmt::format("writing standard output failed ({} {}): {}; the output is incomplete",
                      e.flag, e.path, std::strerror(err)));
    }
    e.finished = true;
    return;
  }
  // Some file systems report a full disk or a quota only when the data reaches the disk.
  if (err == 0 && !e.temp.empty() && ::fsync(e.fd) != 0) err = errno;
  if (err == 0 && ::close(e.fd) != 0)
    err = errno;
  else if (err != 0)
    ::close(e.fd);
  e.fd = -1;
  if (err != 0) {
    discard(e);
    if (err == EINTR) throw_if_interrupted();
    throw std::runtime_error(fmt::format("{} {}: cannot write: {}; nothing was written there",
                                         e.flag, e.path, std::strerror(err)));
  }
  e.finished = true;
}

void OutputFiles::commit_all() {
  for (const auto& e : entries_) {
    if (!e->finished) throw std::logic_error("OutputFiles: " + e->flag + " was not finished");
  }
  // A SIGINT/SIGTERM that arrived after the last poll of a loop (a sweep's last grid point, a
  // replay's final steps) still wins: nothing is replaced, the temporaries go, exit 128 + signal.
  throw_if_interrupted();
  for (auto& ep : entries_) {
    Entry& e = *ep;
    if (e.temp.empty()) continue;
    if (::rename(e.temp.c_str(), e.destination.c_str()) != 0) {
      const int err = errno;
      discard(e);
      throw std::runtime_error(
          fmt::format("{} {}: cannot replace: {}", e.flag, e.path, std::strerror(err)));
    }
    unregister_temporary(e.temp_slot);
    e.temp_slot = -1;
    e.temp.clear();
    // Make the rename itself durable.
    const fs::path dir = fs::path(e.destination).has_parent_path()
                             ? fs::path(e.destination).parent_path()
                             : fs::path(".");
    if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }
}

}  // namespace kvsim::cli
