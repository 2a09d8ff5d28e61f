#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>

#include <fmt/core.h>

#include "kvsim/core/param.h"
#include "kvsim/sim/io/line_reader.h"

namespace kvsim {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

std::string size_text(int64_t bytes) {
  if (bytes % (int64_t{1} << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes % (int64_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} bytes", bytes);
}

std::runtime_error too_large(const std::string& path, const InputLimits& limits, bool gzip) {
  return std::runtime_error(
      fmt::format("{}: input larger than the limit of {}{}{}", path, size_text(limits.max_bytes),
                  gzip ? " after decompression" : "",
                  limits.has_flags ? " (raise it with " + param("max_input_bytes") + ")" : ""));
}

// The most bytes checked against the limits at once. The checks run on pieces of this size
// (aligned to the start of the stream, or the end of a gzip member), the size read_text_file
// always used, so that when two limits are crossed in one input the same one is reported.
constexpr size_t kCheckBytes = size_t{1} << 16;

// The limits of one stream of bytes, checked piece by piece as the stream is read, so a limit
// stops the read (or the inflation) as soon as it is crossed, not after everything is in memory.
// Within a piece the size limit is checked before the line limit.
class LimitCheck {
 public:
  LimitCheck(const std::string& path, const InputLimits& limits, bool gzip)
      : path_(path), limits_(limits), gzip_(gzip) {}

  void add(const char* p, size_t n) {
    if (limits_.max_bytes > 0 && size_ + n > static_cast<uint64_t>(limits_.max_bytes)) {
      throw too_large(path_, limits_, gzip_);
    }
    if (limits_.max_line_bytes > 0) {
      // Every line of the piece, the first one continuing the previous piece's last.
      const char* q = p;
      const char* const end = p + n;
      while (true) {
        const auto* nl =
            static_cast<const char*>(std::memchr(q, '\n', static_cast<size_t>(end - q)));
        line_bytes_ += static_cast<size_t>((nl != nullptr ? nl : end) - q);
        if (line_bytes_ > static_cast<uint64_t>(limits_.max_line_bytes)) {
          throw std::runtime_error(fmt::format(
              "{}:{}: line longer than the limit of {}{}; not a text trace?{}", path_, lines_ + 1,
              size_text(limits_.max_line_bytes), gzip_ ? " after decompression" : "",
              limits_.has_flags ? " (raise the limit with " + param("max_line_bytes") + ")" : ""));
        }
        if (nl == nullptr) break;
        ++lines_;
        line_bytes_ = 0;
        q = nl + 1;
      }
    }
    size_ += n;
  }
  // add() in pieces of at most `piece` bytes.
  void add_pieces(const char* p, size_t n, size_t piece) {
    for (size_t at = 0; at < n; at += piece) add(p + at, std::min(piece, n - at));
  }
  uint64_t size() const { return size_; }

 private:
  const std::string& path_;
  const InputLimits& limits_;
  bool gzip_;
  uint64_t size_ = 0;
  int64_t lines_ = 0;
  size_t line_bytes_ = 0;
};

}  // namespace

namespace detail {

// One input as a stream of checked text: the file read chunk by chunk and, when it starts with
// the gzip magic bytes, inflated member after member. produce() hands the text out in pieces of
// at most unit() bytes; every byte it hands out has passed the limits.
//
// The outcome (text or error message) is that of the whole-file reader this replaced: gzip
// output is inflated and checked in pieces of kCheckBytes starting at a multiple of kCheckBytes
// within a member, as when the whole file was inflated at once, so a corrupt stream reports the
// same byte count whatever the chunk size. Plain text is checked in the same pieces when the
// chunk size is a multiple of kCheckBytes (the default); a smaller chunk (tests) is checked
// chunk by chunk, which can change only which limit is reported when a line and the file cross
// theirs within the same kCheckBytes.
//
// Invariants: for gzip, [z_.next_in, z_.next_in + z_.avail_in) is the unconsumed compressed
// input, inside raw_[0, raw_cap_); raw_read_ counts the file bytes read, so the next unconsumed
// byte is at file offset raw_read_ - z_.avail_in.
class TextSource {
 public:
  TextSource(const std::string& path, const InputLimits& limits, size_t chunk_bytes)
      : path_(path),
        limits_(limits),
        raw_limits_(limits),
        // zlib counts input in 32 bits: at most 1 GiB at a time.
        chunk_(std::clamp<size_t>(chunk_bytes, 1, size_t{1} << 30)),
        plain_piece_(chunk_ % kCheckBytes == 0 ? kCheckBytes : std::min(chunk_, kCheckBytes)) {
    std::error_code ec;
    if (std::filesystem::is_directory(path_, ec)) {
      throw std::runtime_error(fmt::format("{}: is a directory, not a file to read", path_));
    }
    file_.reset(std::fopen(path_.c_str(), "rb"));
    if (!file_) {
      throw std::runtime_error(fmt::format("{}: cannot open: {}", path_, std::strerror(errno)));
    }
    head_size_ = read_file(head_, sizeof head_);
    gzip_ = head_size_ == 2 && static_cast<unsigned char>(head_[0]) == 0x1f &&
            static_cast<unsigned char>(head_[1]) == 0x8b;
    // Compressed bytes have no lines; their size is bounded by the same byte limit.
    raw_limits_.max_line_bytes = 0;
    text_check_.emplace(path_, limits_, /*gzip=*/gzip_);
    if (gzip_) start_gzip();
  }
  ~TextSource() {
    if (inflating_) inflateEnd(&z_);
  }
  TextSource(const TextSource&) = delete;
  TextSource& operator=(const TextSource&) = delete;

  bool gzip() const { return gzip_; }
  // The most bytes one produce() call writes.
  size_t unit() const { return gzip_ ? kCheckBytes : chunk_; }
  // Bytes held besides the caller's text buffer (the compressed input).
  size_t held() const { return raw_cap_; }

  // Writes the next checked text to dst (room for unit() bytes) and returns its size; 0 only at
  // the end of the input.
  size_t produce(char* dst) { return gzip_ ? produce_gzip(dst) : produce_plain(dst); }

 private:
  // fread that sets eof_ on a short read and throws on a read error.
  size_t read_file(char* dst, size_t n) {
    if (eof_ || n == 0) return 0;
    const size_t got = std::fread(dst, 1, n, file_.get());
    if (got < n) {
      if (std::ferror(file_.get())) {
        throw std::runtime_error(fmt::format("{}: read error: {}", path_, std::strerror(errno)));
      }
      eof_ = true;
    }
    return got;
  }

  // Plain text: chunk_ bytes per call (the first ones sniffed for the gzip magic included), so
  // the pieces checked start at multiples of plain_piece_ in the file.
  size_t produce_plain(char* dst) {
    size_t n = std::min(head_size_, chunk_);
    std::memcpy(dst, head_, n);
    head_size_ -= n;
    std::memmove(head_, head_ + n, head_size_);
    n += read_file(dst + n, chunk_ - n);
    text_check_->add_pieces(dst, n, plain_piece_);
    return n;
  }

  void start_gzip() {
    // Without lines to split, the compressed size is known up front for a regular file: check
    // it before inflating anything, as when the whole file was read first.
    std::error_code ec;
    if (limits_.max_bytes > 0 && std::filesystem::is_regular_file(path_, ec)) {
      const auto size = std::filesystem::file_size(path_, ec);
      if (!ec && size > static_cast<uint64_t>(limits_.max_bytes)) {
        throw too_large(path_, limits_, /*gzip=*/false);
      }
    }
    raw_check_.emplace(path_, raw_limits_, /*gzip=*/false);
    // Room for a chunk after the few bytes of a header kept to be checked whole.
    raw_cap_ = chunk_ + 16;
    raw_ = std::make_unique_for_overwrite<char[]>(raw_cap_);
    std::memcpy(raw_.get(), head_, head_size_);
    raw_check_->add(head_, head_size_);
    raw_read_ = head_size_;
    z_.next_in = reinterpret_cast<Bytef*>(raw_.get());
    z_.avail_in = static_cast<uInt>(head_size_);
    head_size_ = 0;
    check_gzip_header();
    if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) {
      throw std::runtime_error(fmt::format("{}: cannot initialise zlib", path_));
    }
    inflating_ = true;
  }

  // Reads until at least n compressed bytes are unconsumed or the file ends; whether there are.
  bool ensure_raw(size_t n) {
    while (z_.avail_in < n && !eof_) {
      char* const base = raw_.get();
      if (z_.avail_in > 0) std::memmove(base, z_.next_in, z_.avail_in);
      const size_t kept = z_.avail_in;
      const size_t got = read_file(base + kept, std::min(chunk_, raw_cap_ - kept));
      raw_check_->add(base + kept, got);
      raw_read_ += got;
      z_.next_in = reinterpret_cast<Bytef*>(base);
      z_.avail_in = static_cast<uInt>(kept + got);
    }
    return z_.avail_in >= n;
  }
  uint64_t raw_offset() const { return raw_read_ - z_.avail_in; }

  // RFC 1952's fixed header fields of the member at the next unconsumed byte, checked before
  // zlib inflates anything: compression method 8 (deflate) and no reserved flag bits.
  void check_gzip_header() {
    const uint64_t at = raw_offset();
    if (!ensure_raw(10)) {
      throw std::runtime_error(
          fmt::format("{}: gzip header cut short ({} bytes at byte {})", path_, z_.avail_in, at));
    }
    const auto method = static_cast<unsigned char>(z_.next_in[2]);
    const auto flags = static_cast<unsigned char>(z_.next_in[3]);
    if (method != 8) {
      throw std::runtime_error(fmt::format(
          "{}: not a valid gzip file: compression method {} at byte {} (only 8, deflate)", path_,
          method, at + 2));
    }
    if ((flags & 0xE0) != 0) {
      throw std::runtime_error(
          fmt::format("{}: not a valid gzip file: reserved header flags 0x{:02x} at byte {}", path_,
                      flags, at + 3));
    }
  }

  std::runtime_error corrupt(const char* why) const {
    return std::runtime_error(fmt::format("{}: gzip data cut short or corrupt after {} bytes: {}",
                                          path_, text_check_->size(), why));
  }

  // After a member's end: another member (its header checked), the end of the file, or an
  // error for bytes that are not a member. zlib's gzread ignores such bytes; here they are an
  // error, since they mean a damaged or mis-assembled file.
  void next_member() {
    if (!ensure_raw(1)) {
      done_ = true;
      return;
    }
    if (ensure_raw(2) && static_cast<unsigned char>(z_.next_in[0]) == 0x1f &&
        static_cast<unsigned char>(z_.next_in[1]) == 0x8b) {
      check_gzip_header();
      inflateReset(&z_);
      return;
    }
    const uint64_t at = raw_offset();
    uint64_t garbage = z_.avail_in;
    z_.avail_in = 0;
    while (ensure_raw(1)) {
      garbage += z_.avail_in;
      z_.avail_in = 0;
    }
    throw std::runtime_error(fmt::format(
        "{}: {} bytes of trailing garbage after the gzip data (from byte {} of the file)", path_,
        garbage, at));
  }

  // Inflates until kCheckBytes are out or a member ends; the output is checked as one piece.
  // What follows a member is looked at in the next call, so that the member's last lines are
  // handed out before an error about the bytes after it.
  size_t produce_gzip(char* dst) {
    constexpr size_t unit = kCheckBytes;
    size_t filled = 0;
    if (member_ended_) {
      member_ended_ = false;
      next_member();
    }
    while (!done_) {
      if (z_.avail_in == 0) ensure_raw(1);
      z_.next_out = reinterpret_cast<Bytef*>(dst + filled);
      z_.avail_out = static_cast<uInt>(unit - filled);
      const int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
        throw corrupt(z_.msg ? z_.msg : zError(rc));
      }
      filled = unit - z_.avail_out;
      if (rc == Z_STREAM_END) {
        text_check_->add(dst, filled);
        if (filled > 0) {
          member_ended_ = true;
          return filled;
        }
        next_member();
        continue;
      }
      if (filled == unit) {
        text_check_->add(dst, filled);
        return filled;
      }
      // Z_BUF_ERROR with output space left: zlib needs input and the file has none left.
      if (rc == Z_BUF_ERROR && z_.avail_in == 0 && eof_) {
        text_check_->add(dst, filled);
        throw corrupt("unexpected end of file");
      }
    }
    return 0;
  }

  const std::string path_;
  const InputLimits limits_;
  InputLimits raw_limits_;
  const size_t chunk_;
  const size_t plain_piece_;  // plain text is checked in pieces of this size
  std::unique_ptr<std::FILE, FileCloser> file_;
  char head_[2] = {};
  size_t head_size_ = 0;  // bytes of head_ not yet handed on
  bool gzip_ = false;
  bool eof_ = false;  // the file has no more bytes
  std::optional<LimitCheck> text_check_;
  // gzip only
  std::optional<LimitCheck> raw_check_;
  std::unique_ptr<char[]> raw_;
  size_t raw_cap_ = 0;
  uint64_t raw_read_ = 0;
  z_stream z_{};
  bool inflating_ = false;
  bool member_ended_ = false;  // a member ended and what follows it is not looked at yet
  bool done_ = false;          // the last member ended at the end of the file
};

}  // namespace detail

std::string read_text_file(const std::string& path, const InputLimits& limits, bool* was_gzip) {
  detail::TextSource source(path, limits, kCheckBytes);
  if (was_gzip) *was_gzip = source.gzip();
  std::string text;
  while (true) {
    const size_t size = text.size();
    text.resize(size + source.unit());
    const size_t n = source.produce(text.data() + size);
    text.resize(size + n);
    if (n == 0) return text;
  }
}

LineReader::LineReader(const std::string& path, const InputLimits& limits, size_t chunk_bytes)
    : path_(path), source_(std::make_unique<detail::TextSource>(path_, limits, chunk_bytes)) {
  Buffer& b = buffer_;
  b.cap = source_->unit();
  b.data = std::make_unique_for_overwrite<char[]>(b.cap);
  b.max_held = b.cap + source_->held();
  // A UTF-8 byte-order mark is not part of the first header name.
  while (b.end < 3 && !b.eof) fill();
  if (b.end >= 3 && std::memcmp(b.data.get(), "\xEF\xBB\xBF", 3) == 0) b.begin = b.scan = 3;
}

LineReader::~LineReader() = default;
LineReader::LineReader(LineReader&&) noexcept = default;
LineReader& LineReader::operator=(LineReader&&) noexcept = default;

void LineReader::fill() const {
  Buffer& b = buffer_;
  char* data = b.data.get();
  if (b.begin > 0) {
    std::memmove(data, data + b.begin, b.end - b.begin);
    b.end -= b.begin;
    b.scan -= b.begin;
    b.begin = 0;
  }
  const size_t unit = source_->unit();
  const size_t need = b.end + unit;
  // Grow geometrically while a line is longer than the buffer; give the memory back once the
  // long line is consumed.
  size_t cap = b.cap;
  if (need > cap) {
    cap = std::max(need, 2 * cap);
  } else if (cap > 4 * unit && need <= 2 * unit) {
    cap = 2 * unit;
  }
  if (cap != b.cap) {
    auto grown = std::make_unique_for_overwrite<char[]>(cap);
    std::memcpy(grown.get(), data, b.end);
    b.data = std::move(grown);
    b.cap = cap;
    data = b.data.get();
  }
  b.max_held = std::max(b.max_held, b.cap + source_->held());
  const size_t n = source_->produce(data + b.end);
  if (n == 0) b.eof = true;
  b.end += n;
}

bool LineReader::next(std::string_view& line) {
  Buffer& b = buffer_;
  while (true) {
    const char* data = b.data.get();
    const auto* nl = static_cast<const char*>(std::memchr(data + b.scan, '\n', b.end - b.scan));
    if (nl != nullptr) {
      const auto end = static_cast<size_t>(nl - data);
      line = std::string_view(data + b.begin, end - b.begin);
      b.begin = b.scan = end + 1;
      last_terminated_ = true;
      break;
    }
    b.scan = b.end;
    if (b.eof) {
      if (b.begin == b.end) return false;
      line = std::string_view(data + b.begin, b.end - b.begin);
      b.begin = b.end;
      last_terminated_ = false;
      break;
    }
    fill();
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  ++line_number_;
  return true;
}

std::string_view LineReader::first_nonblank_line(int64_t* line_number) const {
  Buffer& b = buffer_;
  // Offsets from b.begin, which fill() may move: the line examined and where its "\n" is sought.
  size_t start = 0;
  size_t scan = b.scan - b.begin;
  int64_t number = line_number_;
  while (true) {
    const char* data = b.data.get() + b.begin;
    const size_t size = b.end - b.begin;
    const auto* nl = static_cast<const char*>(std::memchr(data + scan, '\n', size - scan));
    if (nl == nullptr && !b.eof) {
      scan = size;
      fill();
      continue;
    }
    if (nl == nullptr && start == size) return {};
    const size_t end = nl != nullptr ? static_cast<size_t>(nl - data) : size;
    ++number;
    if (line_number) *line_number = number;
    std::string_view line(data + start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // A line of blanks (spaces, tabs) is skipped like an empty one.
    if (line.find_first_not_of(" \t") != std::string_view::npos) return line;
    if (nl == nullptr) return {};
    start = scan = end + 1;
  }
}

}  // namespace kvsim
