#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include <fmt/core.h>

#include "kvsim/sim/traces/trace_line_reader.h"
#include "kvsim/sim/traces/trace_parse.h"

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

// The text of one input as it grows, checked against its limits chunk by chunk, so a limit
// stops the read (or the inflation) as soon as it is crossed, not after everything is in memory.
class LimitedText {
 public:
  LimitedText(const std::string& path, const InputLimits& limits, bool gzip)
      : path_(path), limits_(limits), gzip_(gzip) {}

  void append(const char* p, size_t n) {
    if (limits_.max_bytes > 0 && out_.size() + n > static_cast<uint64_t>(limits_.max_bytes)) {
      throw std::runtime_error(
          fmt::format("{}: input larger than the limit of {}{}{}", path_,
                      size_text(limits_.max_bytes), gzip_ ? " after decompression" : "",
                      limits_.has_flags ? " (raise it with --max-input-bytes)" : ""));
    }
    if (limits_.max_line_bytes > 0) {
      // Every line of the chunk, the first one continuing the previous chunk's last.
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
              limits_.has_flags ? " (raise the limit with --max-line-bytes)" : ""));
        }
        if (nl == nullptr) break;
        ++lines_;
        line_bytes_ = 0;
        q = nl + 1;
      }
    }
    out_.append(p, n);
  }
  size_t size() const { return out_.size(); }
  std::string take() { return std::move(out_); }

 private:
  const std::string& path_;
  const InputLimits& limits_;
  bool gzip_;
  std::string out_;
  int64_t lines_ = 0;
  size_t line_bytes_ = 0;
};

bool gzip_magic(const std::string& raw, size_t at) {
  return raw.size() - at >= 2 && static_cast<unsigned char>(raw[at]) == 0x1f &&
         static_cast<unsigned char>(raw[at + 1]) == 0x8b;
}

// RFC 1952's fixed header fields, checked before zlib inflates anything: compression method 8
// (deflate) and no reserved flag bits.
void check_gzip_header(const std::string& path, const std::string& raw, size_t at) {
  if (raw.size() - at < 10) {
    throw std::runtime_error(
        fmt::format("{}: gzip header cut short ({} bytes at byte {})", path, raw.size() - at, at));
  }
  const auto method = static_cast<unsigned char>(raw[at + 2]);
  const auto flags = static_cast<unsigned char>(raw[at + 3]);
  if (method != 8) {
    throw std::runtime_error(
        fmt::format("{}: not a valid gzip file: compression method {} at byte {} (only 8, deflate)",
                    path, method, at + 2));
  }
  if ((flags & 0xE0) != 0) {
    throw std::runtime_error(
        fmt::format("{}: not a valid gzip file: reserved header flags 0x{:02x} at byte {}", path,
                    flags, at + 3));
  }
}

// Inflates every gzip member of `raw` in turn (RFC 1952 allows concatenation). zlib's gzread
// ignores bytes after a member that do not start another one; here they are an error, since
// they mean a damaged or mis-assembled file.
std::string gunzip(const std::string& path, const std::string& raw, const InputLimits& limits) {
  check_gzip_header(path, raw, 0);
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
    throw std::runtime_error(fmt::format("{}: cannot initialise zlib", path));
  }
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  LimitedText out(path, limits, /*gzip=*/true);
  char buf[1 << 16];
  size_t fed = 0;  // bytes of raw handed to zlib so far
  const auto corrupt = [&](const char* why) {
    return std::runtime_error(fmt::format("{}: gzip data cut short or corrupt after {} bytes: {}",
                                          path, out.size(), why));
  };
  while (true) {
    if (z.avail_in == 0 && fed < raw.size()) {
      // zlib's avail_in is 32-bit: feed at most 1 GiB at a time.
      const size_t chunk = std::min<size_t>(raw.size() - fed, size_t{1} << 30);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data() + fed));
      z.avail_in = static_cast<uInt>(chunk);
      fed += chunk;
    }
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    const int rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      throw corrupt(z.msg ? z.msg : zError(rc));
    }
    out.append(buf, sizeof buf - z.avail_out);
    if (rc == Z_STREAM_END) {
      const size_t next = fed - z.avail_in;  // first byte after this member
      if (next == raw.size()) return out.take();
      if (gzip_magic(raw, next)) {
        check_gzip_header(path, raw, next);
        inflateReset(&z);  // another member follows
        continue;
      }
      throw std::runtime_error(fmt::format(
          "{}: {} bytes of trailing garbage after the gzip data (from byte {} of the file)", path,
          raw.size() - next, next));
    }
    // Z_BUF_ERROR with fresh output space: zlib needs input and the file has none left.
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && fed == raw.size()) {
      throw corrupt("unexpected end of file");
    }
  }
}

}  // namespace

std::string read_text_file(const std::string& path, const InputLimits& limits, bool* was_gzip) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw std::runtime_error(fmt::format("{}: is a directory, not a file to read", path));
  }
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) throw std::runtime_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  char buf[1 << 16];
  size_t n = std::fread(buf, 1, sizeof buf, f.get());
  const bool gz = n >= 2 && static_cast<unsigned char>(buf[0]) == 0x1f &&
                  static_cast<unsigned char>(buf[1]) == 0x8b;
  if (was_gzip) *was_gzip = gz;
  // Compressed bytes have no lines; their size is bounded by the same byte limit.
  InputLimits raw_limits = limits;
  if (gz) raw_limits.max_line_bytes = 0;
  LimitedText text(path, raw_limits, /*gzip=*/false);
  while (true) {
    text.append(buf, n);
    if (n < sizeof buf) break;
    n = std::fread(buf, 1, sizeof buf, f.get());
  }
  if (std::ferror(f.get())) {
    throw std::runtime_error(fmt::format("{}: read error: {}", path, std::strerror(errno)));
  }
  return gz ? gunzip(path, text.take(), limits) : text.take();
}

LineReader::LineReader(const std::string& path, const InputLimits& limits)
    : path_(path), data_(read_text_file(path, limits)) {
  // A UTF-8 byte-order mark is not part of the first header name.
  if (data_.rfind("\xEF\xBB\xBF", 0) == 0) pos_ = 3;
}

bool LineReader::next(std::string_view& line) {
  if (pos_ >= data_.size()) return false;
  const size_t nl = data_.find('\n', pos_);
  const size_t end = nl == std::string::npos ? data_.size() : nl;
  line = std::string_view(data_).substr(pos_, end - pos_);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  last_terminated_ = nl != std::string::npos;
  pos_ = nl == std::string::npos ? data_.size() : nl + 1;
  ++line_number_;
  return true;
}

std::string_view LineReader::first_nonblank_line(int64_t* line_number) const {
  size_t p = pos_;
  int64_t number = line_number_;
  while (p < data_.size()) {
    ++number;
    if (line_number) *line_number = number;
    const size_t nl = data_.find('\n', p);
    const size_t end = nl == std::string::npos ? data_.size() : nl;
    std::string_view line = std::string_view(data_).substr(p, end - p);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!trace_parse::trim(line).empty()) return line;
    if (nl == std::string::npos) break;
    p = nl + 1;
  }
  return {};
}

}  // namespace kvsim
