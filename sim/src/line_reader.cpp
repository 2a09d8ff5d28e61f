#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include <fmt/core.h>

#include "kvsim/sim/trace_line_reader.h"
#include "kvsim/sim/trace_parse.h"

namespace kvsim {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// Inflates every gzip member of `raw` in turn (RFC 1952 allows concatenation). zlib's gzread
// ignores bytes after a member that do not start another one; here they are an error, since
// they mean a damaged or mis-assembled file.
std::string gunzip(const std::string& path, const std::string& raw) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
    throw std::runtime_error(fmt::format("{}: cannot initialise zlib", path));
  }
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  std::string out;
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
      if (next == raw.size()) return out;
      if (raw.size() - next >= 2 && static_cast<unsigned char>(raw[next]) == 0x1f &&
          static_cast<unsigned char>(raw[next + 1]) == 0x8b) {
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

std::string read_text_file(const std::string& path, bool* was_gzip) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw std::runtime_error(fmt::format("{}: is a directory, not a trace file", path));
  }
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) throw std::runtime_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::string out;
  char buf[1 << 16];
  while (true) {
    const size_t n = std::fread(buf, 1, sizeof buf, f.get());
    out.append(buf, n);
    if (n < sizeof buf) break;
  }
  if (std::ferror(f.get())) {
    throw std::runtime_error(fmt::format("{}: read error: {}", path, std::strerror(errno)));
  }
  const bool gz = out.size() >= 2 && static_cast<unsigned char>(out[0]) == 0x1f &&
                  static_cast<unsigned char>(out[1]) == 0x8b;
  if (was_gzip) *was_gzip = gz;
  return gz ? gunzip(path, out) : out;
}

LineReader::LineReader(const std::string& path) : path_(path), data_(read_text_file(path)) {
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
