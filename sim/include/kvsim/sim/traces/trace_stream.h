// TraceStream: a trace validated once, then handed over one request at a time, so that a
// replay's memory follows the requests in flight, not the trace length (docs/traces.md
// §Streaming).
//
// open() reads the file once (the validation pass): every row is parsed and checked exactly as
// read_trace() does, so every error read_trace() would throw is thrown here, before anything
// runs, and the counts a report needs (rows read, dropped rows, the number of requests, the
// longest one) are kept. for_each() then hands over the requests one at a time: the same
// requests, in the same order, with the same arrivals as read_trace(path, options).requests.
//
// A small trace (its requests within max_held_bytes, kMaxHeldBytes by default) is held: open()
// keeps the requests of the validation pass and for_each() hands over copies of them, so the file
// is parsed once. A larger one is streamed: for_each() reads the file again.
//
// A trace streams when its requests keep file order: its arrivals do not decrease along the
// file (or it has none). read_trace() stable-sorts a trace whose arrivals go backwards, which
// needs the whole trace; open() returns nullopt for it, and the caller reads it whole.
//
// Invariants (after open): header().requests is empty; num_requests() is the size
// read_trace(path, options).requests would have; every other field of header() equals
// read_trace's. Memory: a bounded read buffer (LineReader) and one request at a time, plus, for
// a held trace, its requests (at most max_held_bytes of them, the last chunk's spare capacity
// aside).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kvsim/sim/traces/trace.h"

namespace kvsim {

class TraceStream {
 public:
  // The largest trace held in memory rather than read twice: 64 MiB of requests (each counted
  // as sizeof(TraceRequest) plus its hash ids, token ids and session id), about 600,000 requests
  // without hash ids. Azure conv (19,366 requests) takes about 2 MiB.
  static constexpr int64_t kMaxHeldBytes = int64_t{64} << 20;

  // The validation pass. Throws what read_trace(path, options) throws; nullopt when the
  // trace's arrivals go backwards in the file (see above). The requests are held when they take
  // at most max_held_bytes (0: always streamed).
  static std::optional<TraceStream> open(const std::string& path,
                                         const TraceReadOptions& options = {},
                                         int64_t max_held_bytes = kMaxHeldBytes);

  // read_trace's Trace without its requests: path, format, arrival mode, rows read, drops.
  const Trace& header() const { return header_; }
  int64_t num_requests() const { return num_requests_; }
  // default_max_model_len() of the trace read whole: 1 + its longest input + output, or the
  // same TraceError for a request whose length + 1 exceeds int32.
  int32_t default_max_model_len() const;

  // Whether open() kept the requests (for_each reads nothing), else for_each streams the file.
  bool holds_requests() const { return holds_; }

  // The replay pass: calls fn for each request, in order, with a copy of a held request or one
  // read from the file again. Throws whatever fn throws (the pass stops there) and, when
  // streaming, std::runtime_error naming the file when it no longer yields what the validation
  // pass saw (changed in between). A held trace cannot see such a change: it replays what was
  // validated.
  void for_each(const std::function<void(TraceRequest&&)>& fn) const;

 private:
  TraceStream() = default;
  // Turns one parsed row (file order) into the request read_trace would keep, or nothing.
  class Normaliser;

  TraceReadOptions options_;
  Trace header_;
  bool has_arrivals_ = true;
  int64_t num_requests_ = 0;
  int64_t longest_ = 0;  // max input + output over the requests
  // The first request (in order) whose length + 1 exceeds int32: its line and lengths.
  int64_t too_long_line_ = 0;
  int32_t too_long_input_ = 0;
  int32_t too_long_output_ = 0;
  // A held request in 32 bytes: its numbers, and where a request carries more (hash ids, token
  // ids, a session id) the index of its whole copy in held_extras_. A TraceRequest is over 100
  // bytes, nearly all of it empty in most traces, and on a whole Azure conv replay its 2 MiB
  // of fresh pages cost about 1 ms of page faults (issue 27).
  struct HeldRequest {
    int64_t arrival_ns = 0;
    int64_t source_line = 0;
    int32_t input_tokens = 0;
    int32_t output_tokens = 0;
    int32_t priority = 0;
    int32_t extra = -1;  // index into held_extras_, -1: none
  };
  static_assert(sizeof(HeldRequest) == 32);
  // The requests of the validation pass, when held (normalised: read_trace's arrivals), in
  // chunks: filled without moving the earlier ones as one growing vector would.
  bool holds_ = false;
  std::vector<std::vector<HeldRequest>> held_;
  std::vector<TraceRequest> held_extras_;
};

}  // namespace kvsim
