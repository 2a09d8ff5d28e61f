#include "kvsim/sim/traces/trace_writer.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
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

// Plain or gzip output into a stream.
class Sink {
 public:
  Sink(std::ostream& out, bool gzip) : out_(out), gzip_(gzip) {
    // windowBits 16 + 15: a gzip wrapper with zlib's default header, as gzopen() writes.
    if (gzip_ && deflateInit2(&z_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8,
                              Z_DEFAULT_STRATEGY) != Z_OK) {
      throw std::runtime_error("cannot initialise zlib");
    }
  }
  ~Sink() {
    if (gzip_) deflateEnd(&z_);
  }
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;

  void write(std::string_view s) {
    if (!gzip_) {
      out_.write(s.data(), static_cast<std::streamsize>(s.size()));
      return;
    }
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data()));
    z_.avail_in = static_cast<uInt>(s.size());
    deflate_all(Z_NO_FLUSH);
  }
  void close() {
    if (gzip_) deflate_all(Z_FINISH);
    out_.flush();
  }

 private:
  void deflate_all(int flush) {
    char buf[1 << 16];
    while (true) {
      z_.next_out = reinterpret_cast<Bytef*>(buf);
      z_.avail_out = sizeof buf;
      const int rc = deflate(&z_, flush);
      if (rc == Z_STREAM_ERROR) throw std::runtime_error("gzip compression failed");
      out_.write(buf, static_cast<std::streamsize>(sizeof buf - z_.avail_out));
      if (flush == Z_FINISH ? rc == Z_STREAM_END : z_.avail_in == 0 && z_.avail_out != 0) return;
    }
  }
  std::ostream& out_;
  bool gzip_;
  z_stream z_{};
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

std::string kvsim_jsonl_header(size_t num_records) {
  return fmt::format("{{\"kvsim_trace\": 1, \"records\": {}}}", num_records);
}

void write_kvsim_jsonl(std::ostream& out, const std::vector<TraceRequest>& requests, bool gzip) {
  Sink sink(out, gzip);
  std::string buf = kvsim_jsonl_header(requests.size());
  buf.push_back('\n');
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

void write_kvsim_jsonl(const std::string& path, const std::vector<TraceRequest>& requests) {
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    throw std::runtime_error(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  }
  write_kvsim_jsonl(out, requests, ends_with(path, ".gz"));
  out.close();
  if (!out) {
    throw std::runtime_error(fmt::format("{}: cannot write: {}", path,
                                         errno != 0 ? std::strerror(errno) : "write error"));
  }
}

}  // namespace kvsim
