// LineReader streams its input: the lines it hands out equal those of the whole file split at
// "\n" for every chunk size (line breaks, "\r\n" and the byte-order mark across chunk boundaries,
// gzip members split anywhere), its buffers stay bounded by a few chunks and the longest line,
// and its errors are those of the whole-file reader it replaced, message for message (checked
// against a copy of that reader, kept here as the reference).
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include "kvsim/core/param.h"
#include "kvsim/sim/io/line_reader.h"
#include "kvsim/sim/traces/trace_parse.h"
#include "scratch_dir_test.h"

namespace kvsim {
namespace {

// ---- The reference: read_text_file and LineReader as they were before streaming (841a1c9),
// the whole file in memory. Only what the comparison needs is kept.
namespace before {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

std::string size_text(int64_t bytes) {
  if (bytes % (int64_t{1} << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes % (int64_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} bytes", bytes);
}

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

std::string gunzip(const std::string& path, const std::string& raw, const InputLimits& limits) {
  check_gzip_header(path, raw, 0);
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw std::runtime_error("zlib");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  LimitedText out(path, limits, /*gzip=*/true);
  std::vector<char> buf(1 << 16);
  size_t fed = 0;
  const auto corrupt = [&](const char* why) {
    return std::runtime_error(fmt::format("{}: gzip data cut short or corrupt after {} bytes: {}",
                                          path, out.size(), why));
  };
  while (true) {
    if (z.avail_in == 0 && fed < raw.size()) {
      const size_t chunk = std::min<size_t>(raw.size() - fed, size_t{1} << 30);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data() + fed));
      z.avail_in = static_cast<uInt>(chunk);
      fed += chunk;
    }
    z.next_out = reinterpret_cast<Bytef*>(buf.data());
    z.avail_out = static_cast<uInt>(buf.size());
    const int rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      throw corrupt(z.msg ? z.msg : zError(rc));
    }
    out.append(buf.data(), buf.size() - z.avail_out);
    if (rc == Z_STREAM_END) {
      const size_t next = fed - z.avail_in;
      if (next == raw.size()) return out.take();
      if (gzip_magic(raw, next)) {
        check_gzip_header(path, raw, next);
        inflateReset(&z);
        continue;
      }
      throw std::runtime_error(fmt::format(
          "{}: {} bytes of trailing garbage after the gzip data (from byte {} of the file)", path,
          raw.size() - next, next));
    }
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && fed == raw.size()) {
      throw corrupt("unexpected end of file");
    }
  }
}

std::string read_text_file(const std::string& path, const InputLimits& limits) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw std::runtime_error(fmt::format("{}: is a directory, not a file to read", path));
  }
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) throw std::runtime_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::vector<char> buf(1 << 16);
  size_t n = std::fread(buf.data(), 1, buf.size(), f.get());
  const bool gz = n >= 2 && static_cast<unsigned char>(buf[0]) == 0x1f &&
                  static_cast<unsigned char>(buf[1]) == 0x8b;
  InputLimits raw_limits = limits;
  if (gz) raw_limits.max_line_bytes = 0;
  LimitedText text(path, raw_limits, /*gzip=*/false);
  while (true) {
    text.append(buf.data(), n);
    if (n < buf.size()) break;
    n = std::fread(buf.data(), 1, buf.size(), f.get());
  }
  if (std::ferror(f.get())) {
    throw std::runtime_error(fmt::format("{}: read error: {}", path, std::strerror(errno)));
  }
  return gz ? gunzip(path, text.take(), limits) : text.take();
}

}  // namespace before

// One line as LineReader hands it out.
struct Line {
  std::string text;
  int64_t number = 0;
  bool terminated = true;
  bool operator==(const Line&) const = default;
};

// The lines of a whole text, split as the whole-file LineReader did.
std::vector<Line> split_lines(std::string_view data) {
  std::vector<Line> lines;
  size_t pos = data.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
  int64_t number = 0;
  while (pos < data.size()) {
    const size_t nl = data.find('\n', pos);
    const size_t end = nl == std::string_view::npos ? data.size() : nl;
    std::string_view line = data.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back({std::string(line), ++number, nl != std::string_view::npos});
    pos = nl == std::string_view::npos ? data.size() : nl + 1;
  }
  return lines;
}

// What the whole-file first_nonblank_line returned for the text after `consumed` lines.
std::pair<std::string, int64_t> first_nonblank(const std::vector<Line>& lines, size_t consumed) {
  int64_t number = -1;  // unchanged
  for (size_t i = consumed; i < lines.size(); ++i) {
    number = lines[i].number;
    if (!trace_parse::trim(lines[i].text).empty()) return {lines[i].text, number};
  }
  return {"", number};
}

struct ReadResult {
  std::vector<Line> lines;
  std::string error;  // "" when the file was read to the end
  size_t max_buffered = 0;
};

ReadResult read_lines(const std::string& path, size_t chunk, const InputLimits& limits = {}) {
  ReadResult r;
  try {
    LineReader reader(path, limits, chunk);
    std::string_view line;
    while (reader.next(line)) {
      r.lines.push_back({std::string(line), reader.line_number(), reader.last_line_terminated()});
    }
    r.max_buffered = reader.max_buffered_bytes();
  } catch (const std::exception& e) {
    r.error = spell_params(e.what(), ParamSpelling::kCli);  // as the reference wrote it
  }
  return r;
}

std::string error_of_before(const std::string& path, const InputLimits& limits = {}) {
  try {
    before::read_text_file(path, limits);
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

std::string error_of_read_text_file(const std::string& path, const InputLimits& limits = {}) {
  try {
    read_text_file(path, limits);
  } catch (const std::exception& e) {
    return spell_params(e.what(), ParamSpelling::kCli);
  }
  return {};
}

// One gzip member holding `text` (mtime 0, no name), as zlib's deflate writes it.
std::string gzip_member(std::string_view text, int level = 6) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, text.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// Members holding text split at the given offsets (empty members where two offsets are equal).
std::string gzip_members(std::string_view text, std::vector<size_t> cuts) {
  std::string out;
  size_t from = 0;
  cuts.push_back(text.size());
  for (size_t cut : cuts) {
    cut = std::min(cut, text.size());
    out += gzip_member(text.substr(from, cut - from));
    from = cut;
  }
  return out;
}

const std::vector<size_t> kChunks = {1, 2, 3, 7, 64, 4096, kLineReaderChunkBytes};

class LineReaderStream : public kvsim_test::ScratchDirTest {
 protected:
  // Reads `bytes` (written to a file) with every chunk size and checks the lines against the
  // whole-file split, and first_nonblank_line against the whole-file peek at a few points.
  void expect_lines(const std::string& name, const std::string& bytes, std::string_view text) {
    const std::string p = write(name, bytes);
    const std::vector<Line> want = split_lines(text);
    for (const size_t chunk : kChunks) {
      SCOPED_TRACE(fmt::format("{} chunk {}", name, chunk));
      const ReadResult got = read_lines(p, chunk);
      EXPECT_EQ(got.error, "");
      EXPECT_EQ(got.lines, want);
      // Peeks after 0, 1, ... lines consumed (a few), then the rest read on.
      LineReader reader(p, {}, chunk);
      for (size_t consumed = 0; consumed <= std::min<size_t>(want.size(), 4); ++consumed) {
        int64_t number = -1;
        const auto [text_want, number_want] = first_nonblank(want, consumed);
        const std::string_view peek = reader.first_nonblank_line(&number);
        EXPECT_EQ(peek, text_want) << consumed;
        EXPECT_EQ(number, number_want) << consumed;
        // A second peek does not read on: the first view is still valid and equal.
        EXPECT_EQ(reader.first_nonblank_line(), peek);
        EXPECT_EQ(peek, text_want);
        std::string_view line;
        if (consumed < want.size()) {
          ASSERT_TRUE(reader.next(line));
          EXPECT_EQ(line, want[consumed].text);
          EXPECT_EQ(reader.line_number(), want[consumed].number);
        }
      }
    }
  }
  // Plain, one gzip member, and members cut at every offset given.
  void expect_lines_all(const std::string& name, const std::string& text,
                        const std::vector<size_t>& cuts) {
    expect_lines(name, text, text);
    if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f &&
        static_cast<unsigned char>(text[1]) == 0x8b) {
      return;  // would be read as gzip
    }
    expect_lines(name + ".gz", gzip_member(text), text);
    expect_lines(name + ".m.gz", gzip_members(text, cuts), text);
  }
};

TEST_F(LineReaderStream, LinesEqualTheWholeFileSplitForEveryChunkSize) {
  const std::string bom = "\xEF\xBB\xBF";
  expect_lines_all("empty", "", {});
  expect_lines_all("nl", "\n", {0, 0, 1});
  expect_lines_all("one", "a", {0, 1});
  expect_lines_all("one_nl", "a\n", {1});
  expect_lines_all("crlf", "a\r\nbc\r\n\r\nd\r\n", {2, 3, 7});
  expect_lines_all("cr_at_end", "a\r\nb\r", {2, 5});
  expect_lines_all("lone_cr", "a\rb\n\r\r\n", {1, 2});
  expect_lines_all("no_final_nl", "x,y\n1,2\n3,4", {5});
  expect_lines_all("blank", "\n  \n\t\r\n\nabc\n\n", {1, 2, 5});
  expect_lines_all("all_blank", "\n \n\r\n", {1});
  expect_lines_all("bom", bom + "x,y\r\n1,2\n", {1, 2, 3, 4});
  expect_lines_all("bom_only", bom, {1, 2});
  expect_lines_all("bom_nl", bom + "\n", {3});
  expect_lines_all("bom_blank_first", bom + "  \nx\n", {3});
  expect_lines_all("half_bom", "\xEF\xBB", {1});
  expect_lines_all("bom_later", "a\n" + bom + "b\n", {2, 3});
  // Lines longer than the small chunks, and "\r\n" on every alignment.
  std::string text;
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    const int len = static_cast<int>(rng() % 300);
    for (int j = 0; j < len; ++j) text += static_cast<char>('a' + rng() % 26);
    if (rng() % 5 == 0) text += ' ';
    text += rng() % 3 == 0 ? "\r\n" : "\n";
  }
  expect_lines_all("random", text, {1, 100, 101, 5000, 5001, 20000});
  expect_lines_all("random_no_final_nl", text + "tail\r", {text.size(), text.size() + 2});
}

TEST_F(LineReaderStream, LinesAcrossTheDefaultChunkAndGzipOutputBoundaries) {
  // ~5 MiB: lines straddle the 1 MiB read chunks and the 64 KiB gzip output pieces, a "\r\n"
  // and a "\n" sit on each side of a chunk boundary, and one line spans several chunks.
  std::string text;
  std::mt19937 rng(11);
  while (text.size() < (size_t{5} << 20)) {
    const size_t boundary = (text.size() / kLineReaderChunkBytes + 1) * kLineReaderChunkBytes;
    if (boundary - text.size() < 400) {
      text.append(boundary - text.size() - 1, 'q');
      text += (boundary / kLineReaderChunkBytes) % 2 ? "\r\n" : "\n";
      continue;
    }
    text.append(rng() % 300, 'a' + static_cast<char>(rng() % 26));
    text += "\n";
    if (text.size() > (size_t{2} << 20) && text.size() < (size_t{2} << 20) + 400) {
      text.append((size_t{5} << 19) + 3, 'L');  // 2.5 MiB line
      text += "\n";
    }
  }
  const std::vector<Line> want = split_lines(text);
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"big.txt", text},
           {"big.gz", gzip_member(text, 1)},
           {"big.m.gz", gzip_members(text, {kLineReaderChunkBytes - 1, 3 << 20})}}) {
    SCOPED_TRACE(name);
    const std::string p = write(name, bytes);
    for (const size_t chunk : {size_t{4096}, size_t{65536} + 1, kLineReaderChunkBytes}) {
      const ReadResult got = read_lines(p, chunk);
      EXPECT_EQ(got.error, "");
      EXPECT_TRUE(got.lines == want) << chunk;
    }
  }
}

TEST_F(LineReaderStream, BuffersStayBoundedByTheChunkAndTheLongestLine) {
  // 24 MiB of ~100-byte lines: plain and gzip stay under 4 MiB whatever the file size.
  std::string text;
  std::mt19937 rng(3);
  size_t longest = 0;
  while (text.size() < (size_t{24} << 20)) {
    const size_t len = 60 + rng() % 80;
    text.append(len, 'a' + static_cast<char>(rng() % 26));
    text += "\n";
    longest = std::max(longest, len);
  }
  const std::string plain = write("bounded.txt", text);
  const std::string gz = write("bounded.txt.gz", gzip_member(text, 1));
  for (const std::string& p : {plain, gz}) {
    const ReadResult got = read_lines(p, kLineReaderChunkBytes);
    ASSERT_EQ(got.error, "");
    EXPECT_EQ(got.lines.size(), static_cast<size_t>(std::count(text.begin(), text.end(), '\n')));
    EXPECT_GT(got.max_buffered, 0u);
    EXPECT_LE(got.max_buffered, (size_t{4} << 20) + longest) << p;
  }
  // A 6 MiB line in the middle: the buffer grows to hold it (at most twice it and a chunk) and
  // no further.
  const size_t long_line = size_t{6} << 20;
  std::string with_long = text.substr(0, 8 << 20);
  with_long += std::string(long_line, 'L') + "\n";
  with_long += text.substr(8 << 20);
  const std::string lp = write("long.txt", with_long);
  const std::string lgz = write("long.txt.gz", gzip_member(with_long, 1));
  for (const std::string& p : {lp, lgz}) {
    const ReadResult got = read_lines(p, kLineReaderChunkBytes);
    ASSERT_EQ(got.error, "");
    EXPECT_EQ(got.lines.size(),
              static_cast<size_t>(std::count(with_long.begin(), with_long.end(), '\n')));
    EXPECT_GE(got.max_buffered, long_line);
    EXPECT_LE(got.max_buffered, 2 * (long_line + kLineReaderChunkBytes) + kLineReaderChunkBytes)
        << p;
  }
}

TEST_F(LineReaderStream, ErrorsNameTheInputAsBefore) {
  const std::string missing = (dir_ / "missing.csv").string();
  const std::string dir = dir_.string();
  for (const size_t chunk : kChunks) {
    EXPECT_EQ(read_lines(missing, chunk).error,
              missing + ": cannot open: No such file or directory");
    EXPECT_EQ(read_lines(dir, chunk).error, dir + ": is a directory, not a file to read");
  }
  // The constructor throws for these, as before.
  EXPECT_THROW(LineReader{missing}, std::runtime_error);
  EXPECT_THROW(LineReader{dir}, std::runtime_error);
  EXPECT_THROW(LineReader{write("m7.gz", "\x1f\x8b\x07" + std::string(20, 'x'))},
               std::runtime_error);
  // A read error: the kernel refuses to read page 0 of the process's own memory.
  if (std::FILE* f = std::fopen("/proc/self/mem", "rb")) {
    std::fclose(f);
    const std::string want = error_of_before("/proc/self/mem");
    ASSERT_EQ(want.rfind("/proc/self/mem: read error: ", 0), 0u) << want;
    for (const size_t chunk : kChunks) EXPECT_EQ(read_lines("/proc/self/mem", chunk).error, want);
    EXPECT_EQ(error_of_read_text_file("/proc/self/mem"), want);
  }

  const std::string text = "arrived_at,num_prefill_tokens,num_decode_tokens\n" +
                           std::string(5000, '1') + "\n" + "1,2,3\n";
  const std::string p = write("long.csv", text);
  const std::string gz = write("long.csv.gz", gzip_member(text));
  InputLimits line_limit;
  line_limit.max_line_bytes = 4096;
  InputLimits size_limit;
  size_limit.max_bytes = 1000;
  InputLimits no_flags;
  no_flags.max_bytes = 100;
  no_flags.has_flags = false;
  const auto expect_error = [&](const std::string& path, const InputLimits& limits,
                                const std::string& want) {
    SCOPED_TRACE(path);
    EXPECT_EQ(error_of_before(path, limits), want);
    EXPECT_EQ(error_of_read_text_file(path, limits), want);
    for (const size_t chunk : kChunks) EXPECT_EQ(read_lines(path, chunk, limits).error, want);
  };
  expect_error(
      p, line_limit,
      p + ":2: line longer than the limit of 4096 bytes; not a text trace? (raise the limit "
          "with --max-line-bytes)");
  expect_error(p, size_limit,
               p + ": input larger than the limit of 1000 bytes (raise it with --max-input-bytes)");
  expect_error(p, no_flags, p + ": input larger than the limit of 100 bytes");
  expect_error(gz, line_limit,
               gz + ":2: line longer than the limit of 4096 bytes after decompression; not a text "
                    "trace? (raise the limit with --max-line-bytes)");
  expect_error(gz, size_limit,
               gz + ": input larger than the limit of 1000 bytes after decompression (raise it "
                    "with --max-input-bytes)");
  // The compressed size is bounded too (checked before inflating).
  InputLimits tiny;
  tiny.max_bytes = 20;
  expect_error(gz, tiny,
               gz + ": input larger than the limit of 20 bytes (raise it with --max-input-bytes)");

  const std::string member = gzip_member("a,b\n1,2\n");
  const auto gzip_error = [&](const std::string& name, const std::string& bytes,
                              const std::string& want_tail) {
    const std::string path = write(name, bytes);
    expect_error(path, {}, path + want_tail);
  };
  gzip_error("m7.gz", "\x1f\x8b\x07" + std::string(20, 'x'),
             ": not a valid gzip file: compression method 7 at byte 2 (only 8, deflate)");
  gzip_error("flags.gz", std::string("\x1f\x8b\x08\xe0", 4) + std::string(20, 'x'),
             ": not a valid gzip file: reserved header flags 0xe0 at byte 3");
  gzip_error("short.gz", "\x1f\x8b\x08", ": gzip header cut short (3 bytes at byte 0)");
  gzip_error("magic.gz", "\x1f\x8b", ": gzip header cut short (2 bytes at byte 0)");
  gzip_error("second_short.gz", member + std::string("\x1f\x8b\x08\x00", 4),
             fmt::format(": gzip header cut short (4 bytes at byte {})", member.size()));
  gzip_error("second_method.gz", member + "\x1f\x8b\x09" + std::string(20, 'x'),
             fmt::format(": not a valid gzip file: compression method 9 at byte {} (only 8, "
                         "deflate)",
                         member.size() + 2));
  gzip_error("garbage.gz", member + "garbage",
             fmt::format(": 7 bytes of trailing garbage after the gzip data (from byte {} of the "
                         "file)",
                         member.size()));
  gzip_error("garbage1.gz", member + "\x1f",
             fmt::format(": 1 bytes of trailing garbage after the gzip data (from byte {} of the "
                         "file)",
                         member.size()));
  gzip_error("cut.gz", member.substr(0, member.size() - 3),
             ": gzip data cut short or corrupt after 8 bytes: unexpected end of file");
  std::string flipped = member;
  flipped[12] = static_cast<char>(flipped[12] ^ 0xff);
  const std::string fp = write("flipped.gz", flipped);
  const std::string flipped_error = error_of_before(fp);
  ASSERT_EQ(flipped_error.rfind(fp + ": gzip data cut short or corrupt after ", 0), 0u)
      << flipped_error;
  expect_error(fp, {}, flipped_error);
}

// Lines before the offending point are handed out; the error comes when the reader reaches it.
TEST_F(LineReaderStream, ErrorsComeWhereTheReadingReachesThem) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += fmt::format("{},{},{}\n", i, i % 7, i % 13);
  const std::string member = gzip_member(text);
  const std::string p = write("tail.gz", member + "junk");
  LineReader reader(p, {}, 4096);
  std::string_view line;
  int64_t lines = 0;
  try {
    while (reader.next(line)) ++lines;
    FAIL() << "trailing garbage accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("{}: 4 bytes of trailing garbage after the gzip data (from byte {} of "
                          "the file)",
                          p, member.size()));
  }
  EXPECT_EQ(lines, 20000);
  // A long line near the end of a plain file: the lines before it are read first.
  const std::string lp = write("late.csv", text + std::string(300, 'x') + "\n");
  InputLimits limits;
  limits.max_line_bytes = 200;
  const ReadResult got = read_lines(lp, 4096, limits);
  EXPECT_EQ(got.error, lp + ":20001: line longer than the limit of 200 bytes; not a text trace? "
                            "(raise the limit with --max-line-bytes)");
  EXPECT_GT(got.lines.size(), 19000u);
}

// The new reader against the old on damaged gzip files and tight limits: the same text or the
// same message.
TEST_F(LineReaderStream, SameOutcomeAsTheWholeFileReaderOnDamagedInput) {
  std::string text;
  std::mt19937 rng(5);
  while (text.size() < 300000) {
    text.append(rng() % 120, 'a' + static_cast<char>(rng() % 26));
    text += rng() % 4 == 0 ? "\r\n" : "\n";
    if (rng() % 200 == 0) text.append(5000, 'z');
  }
  const std::string good = gzip_members(text, {70000, 70000, 200000});
  std::vector<std::string> inputs = {text, good, good + "\x1f\x8b", good + "x"};
  for (int i = 0; i < 40; ++i) {
    std::string bad = good;
    const size_t at = rng() % bad.size();
    if (i % 3 == 0) {
      bad.resize(at);
    } else {
      bad[at] = static_cast<char>(bad[at] ^ (1 + rng() % 255));
    }
    inputs.push_back(bad);
  }
  std::vector<InputLimits> limits(4);
  limits[1].max_line_bytes = 4000;
  limits[2].max_bytes = 150000;
  limits[3].max_bytes = 150000;
  limits[3].max_line_bytes = 4000;
  int errors = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string p = write(fmt::format("in{}.gz", i), inputs[i]);
    for (const InputLimits& l : limits) {
      SCOPED_TRACE(
          fmt::format("input {} max_bytes {} max_line_bytes {}", i, l.max_bytes, l.max_line_bytes));
      std::string want_text;
      std::string want_error;
      try {
        want_text = before::read_text_file(p, l);
      } catch (const std::exception& e) {
        want_error = e.what();
      }
      errors += !want_error.empty();
      EXPECT_EQ(error_of_read_text_file(p, l), want_error);
      if (want_error.empty()) {
        EXPECT_EQ(read_text_file(p, l), want_text);
      }
      // Any chunk size for gzip; for plain text, multiples of 64 KiB (a smaller chunk can change
      // which of two limits crossed within 64 KiB is reported).
      std::vector<size_t> chunks = {size_t{1} << 16, size_t{3} << 16, kLineReaderChunkBytes};
      if (i > 0) chunks.insert(chunks.end(), {7, 4096});
      for (const size_t chunk : chunks) {
        const ReadResult got = read_lines(p, chunk, l);
        EXPECT_EQ(got.error, want_error) << chunk;
        if (want_error.empty()) {
          EXPECT_TRUE(got.lines == split_lines(want_text)) << chunk;
        }
      }
    }
  }
  EXPECT_GT(errors, 40);
}

TEST_F(LineReaderStream, ReadTextFileKeepsTheWholeTextAndSaysWhetherItWasGzip) {
  const std::string bom_text = "\xEF\xBB\xBF{\"a\": 1}\r\n";
  bool gz = true;
  EXPECT_EQ(read_text_file(write("c.json", bom_text), {}, &gz), bom_text);
  EXPECT_FALSE(gz);
  EXPECT_EQ(read_text_file(write("c.json.gz", gzip_members(bom_text, {2})), {}, &gz), bom_text);
  EXPECT_TRUE(gz);
  EXPECT_EQ(read_text_file(write("e.json", ""), {}, &gz), "");
  EXPECT_FALSE(gz);
}

TEST_F(LineReaderStream, AMovedReaderReadsOn) {
  const std::string p = write("m.txt", "a\nb\nc\n");
  LineReader a(p, {}, 1);
  std::string_view line;
  ASSERT_TRUE(a.next(line));
  LineReader b = std::move(a);
  ASSERT_TRUE(b.next(line));
  EXPECT_EQ(line, "b");
  EXPECT_EQ(b.line_number(), 2);
  EXPECT_EQ(b.path(), p);
  ASSERT_TRUE(b.next(line));
  EXPECT_EQ(line, "c");
  EXPECT_FALSE(b.next(line));
}

long peak_rss_kb() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      long kb = 0;
      status >> kb;
      return kb;
    }
  }
  return -1;
}

// A measurement, not a check: KVSIM_LINE_READER_BENCH=file reads the file line by line with
// LineReader, then whole as before, and prints the time and the peak RSS after each.
TEST(LineReaderBench, StreamingAgainstWholeFile) {
  const char* path = std::getenv("KVSIM_LINE_READER_BENCH");
  if (path == nullptr) GTEST_SKIP() << "set KVSIM_LINE_READER_BENCH=file to measure";
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const long rss0 = peak_rss_kb();
  auto t0 = Clock::now();
  int64_t lines = 0;
  size_t bytes = 0;
  size_t held = 0;
  {
    LineReader reader(path);
    std::string_view line;
    while (reader.next(line)) {
      ++lines;
      bytes += line.size();
    }
    held = reader.max_buffered_bytes();
  }
  const double streaming = seconds(Clock::now() - t0);
  const long rss1 = peak_rss_kb();
  t0 = Clock::now();
  int64_t lines_before = 0;
  size_t bytes_before = 0;
  {
    // As the whole-file LineReader::next() did: views into the text.
    const std::string data = before::read_text_file(path, {});
    size_t pos = data.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
    while (pos < data.size()) {
      const size_t nl = data.find('\n', pos);
      const size_t end = nl == std::string::npos ? data.size() : nl;
      std::string_view line = std::string_view(data).substr(pos, end - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      ++lines_before;
      bytes_before += line.size();
      pos = nl == std::string::npos ? data.size() : nl + 1;
    }
  }
  const double whole = seconds(Clock::now() - t0);
  const long rss2 = peak_rss_kb();
  EXPECT_EQ(lines, lines_before);
  EXPECT_EQ(bytes, bytes_before);
  std::printf(
      "%s: %lld lines\n  streaming:  %.3f s, buffers held at most %zu bytes, peak RSS %ld -> %ld "
      "KB\n  whole file: %.3f s, peak RSS %ld -> %ld KB\n",
      path, static_cast<long long>(lines), streaming, held, rss0, rss1, whole, rss1, rss2);
}

}  // namespace
}  // namespace kvsim
