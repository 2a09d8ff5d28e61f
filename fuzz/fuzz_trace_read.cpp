// Fuzz target: read_trace() on arbitrary bytes, with detection (--format auto) and with one
// forced layout picked from the input's size, skipping bad rows or not. On success the
// invariants of trace.h hold for every request.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>

#include "fuzz_check.h"
#include "kvsim/sim/traces/trace.h"

namespace {

// One scratch file per process (read_trace reads a path), removed when the process exits.
class ScratchFile {
 public:
  ScratchFile() {
    const int fd = ::mkstemp(path_.data());
    if (fd < 0) std::abort();
    ::close(fd);
  }
  ~ScratchFile() { ::unlink(path_.c_str()); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_ = "/tmp/kvsim_fuzz_trace_XXXXXX";
};

const std::string& scratch_path() {
  static const ScratchFile file;
  return file.path();
}

void check(const kvsim::Trace& t) {
  KVSIM_FUZZ_CHECK(t.format != kvsim::TraceFormat::AUTO);
  KVSIM_FUZZ_CHECK(t.rows_read >= static_cast<int64_t>(t.requests.size()) + t.dropped_total());
  int64_t last = 0;
  for (const kvsim::TraceRequest& r : t.requests) {
    KVSIM_FUZZ_CHECK(r.arrival_ns >= 0 && r.arrival_ns <= kvsim::kMaxArrivalNs);
    KVSIM_FUZZ_CHECK(r.arrival_ns >= last || t.arrival_mode != kvsim::ArrivalMode::TRACE);
    last = r.arrival_ns;
    KVSIM_FUZZ_CHECK(r.input_tokens >= 0 && r.output_tokens >= 0);
    if (r.hash_ids) {
      KVSIM_FUZZ_CHECK(r.hash_block_size > 0);
      const int64_t blocks = (int64_t{r.input_tokens} + r.hash_block_size - 1) / r.hash_block_size;
      KVSIM_FUZZ_CHECK(static_cast<int64_t>(r.hash_ids->size()) == blocks);
    }
    if (r.prompt_token_ids) {
      KVSIM_FUZZ_CHECK(static_cast<int64_t>(r.prompt_token_ids->size()) == r.input_tokens);
    }
  }
}

void read_once(const kvsim::TraceReadOptions& o) {
  try {
    check(kvsim::read_trace(scratch_path(), o));
  } catch (const std::bad_alloc&) {
    throw;  // memory blow-ups are findings
  } catch (const std::exception&) {
    // A clean refusal is a correct answer to bad input.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    FILE* f = std::fopen(scratch_path().c_str(), "wb");
    if (f == nullptr) std::abort();
    if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
  }
  kvsim::TraceReadOptions o;
  o.limits.max_bytes = 1 << 20;
  o.limits.max_line_bytes = 1 << 16;
  read_once(o);
  o.format = static_cast<kvsim::TraceFormat>(1 + size % 7);
  o.skip_bad_rows = (size / 7) % 2 == 1;
  read_once(o);
  return 0;
}
