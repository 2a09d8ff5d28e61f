// Writes requests in kvsim's native JSONL trace format (docs/traces.md), the format read back
// by read_trace() with TraceFormat::KVSIM.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "kvsim/sim/traces/trace.h"

namespace kvsim {

// One JSON object, without the newline. Keys in a fixed order; arrival_s is written with exactly
// nine fractional digits so that it reads back to the same nanosecond. priority and session_id
// appear only when set; hash_block_size + hash_ids or prompt_token_ids only when present.
std::string format_kvsim_jsonl(const TraceRequest& request);

// The first line of a written trace, without the newline: {"kvsim_trace": 1, "records": N}.
// It makes the file self-delimiting: read_trace() refuses a file whose record count differs
// from the header's (a copy or a write cut short at a line boundary).
std::string kvsim_jsonl_header(size_t num_records);

// Writes the header line and one line per request to `out`, gzip-compressed when `gzip` (zlib's
// default header: no name, mtime 0, so the bytes are reproducible). Throws std::runtime_error
// when deflate fails; stream errors are left in `out`'s state for the caller to report.
void write_kvsim_jsonl(std::ostream& out, const std::vector<TraceRequest>& requests, bool gzip);

// The same to a file (gzip when the path ends in ".gz"), written in place: for tests and tools.
// The CLI writes through OutputFiles instead (a temporary renamed into place). Throws
// std::runtime_error naming the file and the cause on any write error.
void write_kvsim_jsonl(const std::string& path, const std::vector<TraceRequest>& requests);

}  // namespace kvsim
