// Internal: the CSV headers and row formatters shared by the single-replica writers (report.h)
// and the cluster writers (cluster_report.h), so both print the same columns the same way.
#pragma once

#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string_view>

#include <fmt/format.h>

#include "kvsim/sim/engine/replay.h"

namespace kvsim::detail {

inline constexpr std::string_view kTimelineCsvHeader =
    "step,time_s,duration_s,running,waiting,scheduled_reqs,scheduled_tokens,prefill_tokens,"
    "decode_tokens,used_blocks,free_blocks,cached_blocks,padding_tokens,preemptions,"
    "admission_stop,swap_out_blocks,swap_in_blocks,host_slots_used";
inline constexpr std::string_view kRequestsCsvHeader =
    "request_id,source_line,arrival_s,prompt_tokens,max_tokens,output_tokens,priority,"
    "first_scheduled_s,first_token_s,finish_s,queueing_s,ttft_s,e2e_s,preemptions,"
    "scheduled_tokens,recomputed_tokens,prefix_hit_tokens,status,reject_reason,swap_outs";

// The rows are formatted straight into one buffer (std::to_chars, no per-field strings) and
// written in large chunks: per-step output is 350k rows on a whole Azure replay (issue 27).
// A row of either CSV is far shorter than kMaxCsvRow: 20 fields of at most 21 characters each,
// two short words and a reject reason, which is a fixed enum name.
inline constexpr size_t kMaxCsvRow = 1024;
// Room for one field's text: int64's longest decimal (20 characters) and seconds' (20), copied
// as one fixed-size block (up to kFieldTextBytes - 1 bytes past the field, inside kMaxCsvRow;
// a timeline row's column groups copy up to 128 bytes the same way).
inline constexpr size_t kFieldTextBytes = 24;
inline constexpr size_t kCsvFlushBytes = size_t{1} << 18;

// Makes room for one more row and returns where it starts; end_row() takes its end.
inline char* begin_row(fmt::memory_buffer& buf) {
  buf.reserve(buf.size() + kMaxCsvRow);
  return buf.data() + buf.size();
}
inline void end_row(fmt::memory_buffer& buf, char* end) {
  buf.resize(static_cast<size_t>(end - buf.data()));
}

// Writes the buffer out once it holds kCsvFlushBytes (always, with force).
inline void flush_csv(std::ostream& os, fmt::memory_buffer& buf, bool force = false) {
  if (buf.size() < kCsvFlushBytes && !force) return;
  os.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  buf.clear();
}

// "00" .. "99": two digits per lookup.
inline constexpr char kDigitPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";
inline char* put_pair(char* p, uint32_t v) {  // v < 100, always two digits
  std::memcpy(p, kDigitPairs + 2 * v, 2);
  return p + 2;
}

// fmt's "{}" of an integer. Per-step rows are mostly counts below 10000: those are written
// without a branch on their length (branches on the length mispredict on varied counts: 64 ns a
// timeline row with them, 50 without; issue 27) as four digits of which the leading zeros are
// shifted out, stored as one 4-byte word (up to 3 bytes past the number, inside begin_row's
// kMaxCsvRow); larger and negative values go to std::to_chars.
inline char* put_int(char* p, int64_t v) {
  if constexpr (std::endian::native == std::endian::little) {
    if (static_cast<uint64_t>(v) < 10000) {
      const auto u = static_cast<uint32_t>(v);
      uint16_t hi = 0;
      uint16_t lo = 0;
      std::memcpy(&hi, kDigitPairs + 2 * (u / 100), 2);
      std::memcpy(&lo, kDigitPairs + 2 * (u % 100), 2);
      const int n =
          1 + static_cast<int>(u >= 10) + static_cast<int>(u >= 100) + static_cast<int>(u >= 1000);
      // The first character is the lowest byte.
      const uint32_t w = (uint32_t{hi} | uint32_t{lo} << 16) >> (8 * (4 - n));
      std::memcpy(p, &w, 4);
      return p + n;
    }
  }
  return std::to_chars(p, p + 21, v).ptr;
}
inline char* put_text(char* p, std::string_view s) {
  if (s.empty()) return p;  // an empty view's data() may be null, which memcpy must not get
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}
// format_seconds(ns): "{s}.{ns:09d}", nothing when ns < 0.
inline char* put_seconds(char* p, int64_t ns) {
  if (ns < 0) return p;
  p = put_int(p, ns / 1'000'000'000);
  *p++ = '.';
  const auto frac = static_cast<uint32_t>(ns % 1'000'000'000);
  const uint32_t hi = frac / 100'000;  // the first 4 of the 9 digits
  const uint32_t lo = frac % 100'000;  // the last 5
  p = put_pair(p, hi / 100);
  p = put_pair(p, hi % 100);
  *p++ = static_cast<char>('0' + lo / 10'000);
  p = put_pair(p, lo / 100 % 100);
  return put_pair(p, lo % 100);
}

// Timeline rows, '\n'-terminated, at p (begin_row). Consecutive steps differ in a few counts
// (a decode step: the clock, the step, blocks and padding), so each field keeps the value and
// text it last printed and copies that text when the value is unchanged; a step one above the
// last is incremented in place. The bytes are those of formatting every field (put_int,
// put_seconds, to_string) whatever the rows' order; only the cost depends on it (issue 27: 920
// instructions a row field by field on the whole Azure conv replay, see bench/RESULTS.md).
// Two runs of columns rarely change at all - the counts of requests and tokens (columns 3-8:
// they move at arrivals, prefills and finishes) and the tail (13-17: preemptions, the admission
// stop, swaps) - so each run keeps its whole text, ",v,v,...", and copies it while none of its
// values changed: one comparison and one copy instead of one per column.
// Invariant: for every field, text[0, len) is the formatting of value; for every group,
// text[0, len) is "," followed by each value's formatting, separated by ",".
class TimelineRowFormatter {
 public:
  TimelineRowFormatter();
  char* put(char* p, const TimelineRow& r);

 private:
  struct Field {
    int64_t value = 0;
    uint32_t len = 0;
    char text[kFieldTextBytes] = {};
  };
  // Room for a group's text: 6 columns of at most 21 characters with their commas (126).
  static constexpr size_t kGroupTextBytes = 128;
  template <size_t N>
  struct Group {
    int64_t values[N] = {};
    uint32_t len = 0;
    char text[kGroupTextBytes] = {};
  };
  Field step_;
  Field time_;
  Field duration_;
  Group<6> counts_;  // running .. decode_tokens
  Field blocks_[4];  // used_blocks, free_blocks, cached_blocks, padding_tokens
  Group<5> tail_;  // preemptions, admission_stop, swap_out_blocks, swap_in_blocks, host_slots_used
};

// One line, '\n'-terminated, at p (begin_row); returns its end.
char* put_request_row(char* p, const RequestRecord& r, std::string_view reject_reason);

}  // namespace kvsim::detail
