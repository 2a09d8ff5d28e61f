#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
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
struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

std::string read_gzip(const std::string& path) {
  std::unique_ptr<gzFile_s, GzCloser> gz(gzopen(path.c_str(), "rb"));
  if (!gz) throw std::runtime_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  gzbuffer(gz.get(), 1 << 17);
  std::string out;
  char buf[1 << 16];
  while (true) {
    const int n = gzread(gz.get(), buf, sizeof buf);
    if (n < 0) {
      int err = 0;
      const char* msg = gzerror(gz.get(), &err);
      throw std::runtime_error(fmt::format("{}: corrupt gzip data: {}", path, msg));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  // zlib reports a stream cut short only through gzerror once reading stops.
  int err = Z_OK;
  const char* msg = gzerror(gz.get(), &err);
  if (err != Z_OK) {
    throw std::runtime_error(fmt::format("{}: gzip data cut short or corrupt after {} bytes: {}",
                                         path, out.size(), msg));
  }
  return out;
}

}  // namespace

std::string read_text_file(const std::string& path, bool* was_gzip) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) throw std::runtime_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  unsigned char magic[2] = {0, 0};
  const size_t got = std::fread(magic, 1, 2, f.get());
  const bool gz = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  if (was_gzip) *was_gzip = gz;
  if (gz) return read_gzip(path);

  std::string out(reinterpret_cast<const char*>(magic), got);
  char buf[1 << 16];
  while (true) {
    const size_t n = std::fread(buf, 1, sizeof buf, f.get());
    out.append(buf, n);
    if (n < sizeof buf) break;
  }
  if (std::ferror(f.get())) {
    throw std::runtime_error(fmt::format("{}: read error: {}", path, std::strerror(errno)));
  }
  return out;
}

LineReader::LineReader(const std::string& path)
    : path_(path), data_(read_text_file(path, &gzipped_)) {
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

std::string_view LineReader::first_nonblank_line() const {
  size_t p = pos_;
  while (p < data_.size()) {
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
