// Writes requests in kvsim's native JSONL trace format (docs/traces.md), the format read back
// by read_trace() with TraceFormat::KVSIM.
#pragma once

#include <string>
#include <vector>

#include "kvsim/sim/trace.h"

namespace kvsim {

// One JSON object, without the newline. Keys in a fixed order; arrival_s is written with exactly
// nine fractional digits so that it reads back to the same nanosecond. priority and session_id
// appear only when set; hash_block_size + hash_ids or prompt_token_ids only when present.
std::string format_kvsim_jsonl(const TraceRequest& request);

// Writes one line per request to `path` ("-" = stdout), gzip-compressed when the path ends in
// ".gz" (zlib's default header: no name, mtime 0, so the bytes are reproducible). Throws
// std::runtime_error naming the file on any write error.
void write_kvsim_jsonl(const std::string& path, const std::vector<TraceRequest>& requests);

}  // namespace kvsim
