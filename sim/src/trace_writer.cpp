#include "kvsim/sim/trace_writer.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kvsim {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Buffered output to a plain file, stdout or a gzip file.
class Sink {
 public:
  explicit Sink(const std::string& path) : path_(path) {
    if (path == "-") {
      file_ = stdout;
    } else if (ends_with(path, ".gz")) {
      gz_ = gzopen(path.c_str(), "wb");
      if (!gz_) fail(std::strerror(errno));
    } else {
      file_ = std::fopen(path.c_str(), "wb");
      if (!file_) fail(std::strerror(errno));
    }
  }
  ~Sink() {
    if (gz_) gzclose(gz_);
    if (file_ && file_ != stdout) std::fclose(file_);
  }
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;

  void write(std::string_view s) {
    if (s.empty()) return;
    if (gz_) {
      if (gzwrite(gz_, s.data(), static_cast<unsigned>(s.size())) != static_cast<int>(s.size())) {
        int err = 0;
        fail(gzerror(gz_, &err));
      }
    } else if (std::fwrite(s.data(), 1, s.size(), file_) != s.size()) {
      fail(std::strerror(errno));
    }
  }
  void close() {
    if (gz_) {
      const int rc = gzclose(gz_);
      gz_ = nullptr;
      if (rc != Z_OK) fail("gzclose failed");
    } else if (file_ == stdout) {
      if (std::fflush(stdout) != 0) fail(std::strerror(errno));
    } else if (file_) {
      const int rc = std::fclose(file_);
      file_ = nullptr;
      if (rc != 0) fail(std::strerror(errno));
    }
  }

 private:
  [[noreturn]] void fail(const char* why) {
    throw std::runtime_error(fmt::format("{}: cannot write: {}", path_, why));
  }
  std::string path_;
  std::FILE* file_ = nullptr;
  gzFile gz_ = nullptr;
};

template <typename T>
void append_array(std::string& out, const std::vector<T>& v) {
  out.push_back('[');
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ", ";
    fmt::format_to(std::back_inserter(out), "{}", v[i]);
  }
  out.push_back(']');
}

}  // namespace

std::string format_kvsim_jsonl(const TraceRequest& r) {
  std::string out;
  const int64_t sec = r.arrival_ns / 1'000'000'000;
  const int64_t frac = r.arrival_ns % 1'000'000'000;
  const char* sign = r.arrival_ns < 0 ? "-" : "";
  fmt::format_to(std::back_inserter(out),
                 "{{\"arrival_s\": {}{}.{:09d}, \"input_tokens\": {}, \"output_tokens\": {}", sign,
                 sec < 0 ? -sec : sec, frac < 0 ? -frac : frac, r.input_tokens, r.output_tokens);
  if (r.priority != 0) fmt::format_to(std::back_inserter(out), ", \"priority\": {}", r.priority);
  if (!r.session_id.empty()) {
    out += ", \"session_id\": ";
    out += nlohmann::json(r.session_id).dump();
  }
  if (r.hash_ids) {
    fmt::format_to(std::back_inserter(out),
                   ", \"hash_block_size\": {}, \"hash_ids\": ", r.hash_block_size);
    append_array(out, *r.hash_ids);
  }
  if (r.prompt_token_ids) {
    out += ", \"prompt_token_ids\": ";
    append_array(out, *r.prompt_token_ids);
  }
  out.push_back('}');
  return out;
}

void write_kvsim_jsonl(const std::string& path, const std::vector<TraceRequest>& requests) {
  Sink sink(path);
  std::string buf;
  for (const auto& r : requests) {
    buf += format_kvsim_jsonl(r);
    buf.push_back('\n');
    if (buf.size() > (1 << 20)) {
      sink.write(buf);
      buf.clear();
    }
  }
  sink.write(buf);
  sink.close();
}

}  // namespace kvsim
