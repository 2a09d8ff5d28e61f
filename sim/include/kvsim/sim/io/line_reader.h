// Text input for kvsim's readers (traces, model configs, GPU specs, calibration files): plain or
// gzip-compressed (detected by the gzip magic bytes 1f 8b, not by the name), streamed in bounded
// chunks and split into lines, so that a trace of any size is read in a few MiB of memory (a
// 10^7-request trace is ~900 MB of text).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
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

// How much a LineReader reads from the file at a time (compressed bytes for gzip input). 64 KiB
// rather than more: the buffer is reused, so a bigger one only adds fresh pages to fault in
// (1 MiB cost 175 more page faults and 0.5 ms on the whole Azure conv replay; issue 27).
inline constexpr size_t kLineReaderChunkBytes = size_t{1} << 16;

// Reads a file into memory, decompressing it when it starts with the gzip magic bytes
// (concatenated gzip members are read in sequence). Throws std::runtime_error naming the file
// when it cannot be opened or read (a directory included), when a limit is exceeded, when a
// gzip header is invalid (checked before anything is inflated), and when a gzip stream is
// corrupt, cut short, or followed by bytes that are not another gzip member. For small files
// (configs, sweep shards); traces go through LineReader.
std::string read_text_file(const std::string& path, const InputLimits& limits = {},
                           bool* was_gzip = nullptr);

namespace detail {
class TextSource;  // the file, its decompression and its limits (line_reader.cpp)
}  // namespace detail

// Hands out the lines of a file in order, reading it chunk by chunk: it holds one chunk, the
// line being assembled and (for gzip) one chunk of compressed input, never the whole file. A line
// excludes its "\n" and a "\r" before it; a UTF-8 byte-order mark at the start of the file is
// skipped. line_number() is 1-based and counts every line, blank ones included, so that it
// matches what an editor shows.
//
// Errors are the ones read_text_file() throws, with the same messages, raised when the reading
// reaches the offending point: the constructor throws for a file that cannot be opened, a
// directory and an invalid first gzip header; a limit, a read error, a corrupt gzip stream or
// trailing garbage may surface in a later next() or first_nonblank_line(), after the lines
// before the offending point were handed out. After a throw the reader is unusable.
//
// Invariants (buffer_.data = [0, cap) of which [begin, end) is read and not yet handed out):
// begin <= scan <= end <= cap; [begin, scan) holds no "\n"; every byte in [begin, end) passed
// the limits; cap <= 2 * (unit + the longest line so far), unit being the chunk (plain) or
// 64 KiB (gzip output), and it drops back to 2 * unit once such a line is consumed.
class LineReader {
 public:
  // chunk_bytes (> 0) is how much is read at a time; tests use tiny chunks to put line breaks,
  // "\r\n" and the byte-order mark across chunk boundaries. Errors are those of
  // read_text_file() for any chunk size, except that a plain file read in chunks that are not
  // a multiple of 64 KiB may report the other of two limits crossed within the same 64 KiB.
  explicit LineReader(const std::string& path, const InputLimits& limits = {},
                      size_t chunk_bytes = kLineReaderChunkBytes);
  ~LineReader();
  LineReader(LineReader&&) noexcept;
  LineReader& operator=(LineReader&&) noexcept;
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line, or false at the end of the file. A final line without "\n" is still a line.
  // The view points into the reader's buffer: it is valid until the next call to next().
  bool next(std::string_view& line);
  int64_t line_number() const { return line_number_; }
  // Whether the line last returned was terminated by "\n" (false only for a last line at EOF).
  bool last_line_terminated() const { return last_terminated_; }
  const std::string& path() const { return path_; }
  // The first line that is not blank, without consuming anything; empty if there is none.
  // Its 1-based line number goes to *line_number when given. It reads ahead as far as that
  // line (the blank lines before it stay buffered); the view is valid until the next call to
  // next().
  std::string_view first_nonblank_line(int64_t* line_number = nullptr) const;

  // The most bytes the reader's buffers held at once (text and compressed input), for tests
  // that check that memory stays bounded.
  size_t max_buffered_bytes() const { return buffer_.max_held; }

 private:
  // The text read ahead. Mutable: first_nonblank_line() peeks by reading further, which changes
  // what is buffered but not what the reader hands out.
  struct Buffer {
    std::unique_ptr<char[]> data;
    size_t cap = 0;
    size_t begin = 0;  // the first byte not handed out
    size_t scan = 0;   // where the search for the "\n" ending the line at begin resumes
    size_t end = 0;    // one past the last byte read
    bool eof = false;  // the source has nothing more
    size_t max_held = 0;
  };
  // Moves the unconsumed bytes to the front and reads one more chunk (or sets eof).
  void fill() const;

  std::string path_;
  std::unique_ptr<detail::TextSource> source_;
  mutable Buffer buffer_;
  int64_t line_number_ = 0;
  bool last_terminated_ = true;
};

}  // namespace kvsim
