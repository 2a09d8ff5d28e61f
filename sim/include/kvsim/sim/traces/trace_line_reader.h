// Whole-file text input for the trace readers: plain or gzip-compressed (detected by the gzip
// magic bytes 1f 8b, not by the name), split into lines.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvsim {

// Limits on one text input, enforced while it is read and inflated, so that /dev/zero, a gzip
// bomb or a file that is not text fails early with a message naming the input and the limit
// (docs/files.md). 0 = no limit.
inline constexpr int64_t kDefaultMaxInputBytes = int64_t{4} << 30;   // 4 GiB, decompressed
inline constexpr int64_t kDefaultMaxLineBytes = int64_t{256} << 20;  // 256 MiB per line
struct InputLimits {
  int64_t max_bytes = kDefaultMaxInputBytes;
  int64_t max_line_bytes = kDefaultMaxLineBytes;
  // The flags that raise the limits, for the message; an input without flags says so.
  bool has_flags = true;
};

// Reads a file into memory, decompressing it when it starts with the gzip magic bytes
// (concatenated gzip members are read in sequence). Throws std::runtime_error naming the file
// when it cannot be opened or read (a directory included), when a limit is exceeded, when a
// gzip header is invalid (checked before anything is inflated), and when a gzip stream is
// corrupt, cut short, or followed by bytes that are not another gzip member.
std::string read_text_file(const std::string& path, const InputLimits& limits = {},
                           bool* was_gzip = nullptr);

// Hands out the lines of a file in order. A line excludes its "\n" and a "\r" before it.
// line_number() is 1-based and counts every line, blank ones included, so that it matches what
// an editor shows.
class LineReader {
 public:
  explicit LineReader(const std::string& path, const InputLimits& limits = {});

  // The next line, or false at the end of the file. A final line without "\n" is still a line.
  bool next(std::string_view& line);
  int64_t line_number() const { return line_number_; }
  // Whether the line last returned was terminated by "\n" (false only for a last line at EOF).
  bool last_line_terminated() const { return last_terminated_; }
  const std::string& path() const { return path_; }
  // The first line that is not blank, without consuming anything; empty if there is none.
  // Its 1-based line number goes to *line_number when given.
  std::string_view first_nonblank_line(int64_t* line_number = nullptr) const;

 private:
  std::string path_;
  std::string data_;
  size_t pos_ = 0;
  int64_t line_number_ = 0;
  bool last_terminated_ = true;
};

}  // namespace kvsim
