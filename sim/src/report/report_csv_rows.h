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

// The decimal text of every v < 10000, looked up instead of computed (issue 27: a timeline row
// reformats five or six such counts, at about 25 instructions each with digit arithmetic):
// text_len[v] holds the digits in its low bytes, first character first in memory (the 4-byte
// store below writes them), and the length in its top byte; padded[v] holds the four digits with
// leading zeros (put_seconds' fraction). 120 KB, built at compile time.
struct SmallDecimals {
  uint64_t text_len[10000];
  uint32_t padded[10000];
};
inline constexpr SmallDecimals kSmallDecimals = [] {
  SmallDecimals t{};
  for (uint32_t v = 0; v < 10000; ++v) {
    const uint32_t digits[4] = {v / 1000, v / 100 % 10, v / 10 % 10, v % 10};
    const int len =
        1 + static_cast<int>(v >= 10) + static_cast<int>(v >= 100) + static_cast<int>(v >= 1000);
    uint64_t text = 0;
    uint32_t padded = 0;
    for (int i = 0; i < 4; ++i) {
      const uint32_t c = '0' + digits[i];
      // Byte k of the stored value is the k-th character (little-endian; see put_int).
      padded |= c << (8 * i);
      if (i >= 4 - len) text |= uint64_t{c} << (8 * (i - (4 - len)));
    }
    t.text_len[v] = text | uint64_t(len) << 56;
    t.padded[v] = padded;
  }
  return t;
}();

// fmt's "{}" of an integer. Values below 10000 (most per-step counts) are one table load and one
// 4-byte store (up to 3 bytes past the number, inside begin_row's kMaxCsvRow); larger and
// negative values go to std::to_chars.
inline char* put_int(char* p, int64_t v) {
  if constexpr (std::endian::native == std::endian::little) {
    if (static_cast<uint64_t>(v) < 10000) {
      const uint64_t e = kSmallDecimals.text_len[static_cast<size_t>(v)];
      const auto text = static_cast<uint32_t>(e);
      std::memcpy(p, &text, 4);
      return p + (e >> 56);
    }
  }
  return std::to_chars(p, p + 21, v).ptr;
}
// Four digits of v < 10000 with leading zeros.
inline char* put_padded4(char* p, uint32_t v) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &kSmallDecimals.padded[v], 4);
  } else {
    p[0] = static_cast<char>('0' + v / 1000);
    p[1] = static_cast<char>('0' + v / 100 % 10);
    p[2] = static_cast<char>('0' + v / 10 % 10);
    p[3] = static_cast<char>('0' + v % 10);
  }
  return p + 4;
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
  const uint32_t rest = frac % 100'000'000;  // the last 8 of the 9 digits
  *p++ = static_cast<char>('0' + frac / 100'000'000);
  p = put_padded4(p, rest / 10'000);
  return put_padded4(p, rest % 10'000);
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
// Most rows change only columns whose text keeps its length (the step, the clock, the blocks, the
// padding): such a row is the last row's text, copied whole, with those columns' texts written
// over theirs at the same offsets - no pass that moves the write position column by column
// (each move waits on the length before it: a chain through every column).
// Invariant: for every field, text[0, len) is the formatting of value; for every group,
// text[0, len) is "," followed by each value's formatting, separated by ","; when row_len_ > 0,
// row_[0, row_len_) is the last row put (its '\n' included) and offset_[k] where column k's
// text starts in it (kColumns: step, time, duration, the counts group, the four block columns,
// the tail group).
class TimelineRowFormatter {
 public:
  TimelineRowFormatter();
  // Not copyable: column_field_ points into the object.
  TimelineRowFormatter(const TimelineRowFormatter&) = delete;
  TimelineRowFormatter& operator=(const TimelineRowFormatter&) = delete;
  char* put(char* p, const TimelineRow& r);
  // The row after the last one put (a new formatter's last row is step 0 with every column 0):
  // its step + 1 with the columns `d` holds (TimelineStepDelta). The same bytes as put() of that
  // row.
  char* put_successor(char* p, const TimelineStepDelta& d);

  // Which columns' texts a row changed and whether each kept its length (put's helpers).
  struct Changes {
    uint32_t changed = 0;  // bit k: column k's text changed
    bool same_lengths = true;
  };
  static constexpr size_t kColumns = 9;
  // A row longer than this (never on a real replay) always takes the column-by-column path.
  static constexpr size_t kRowCopyBytes = 128;
  struct Field {
    int64_t value = 0;
    uint32_t len = 0;
    char text[kFieldTextBytes] = {};
  };

 private:
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
  uint32_t row_len_ = 0;  // 0: no last row to start from
  uint32_t offset_[kColumns] = {};
  char row_[kRowCopyBytes] = {};
  // Column k's field (null for the two groups, which are never written over in place).
  const Field* column_field_[kColumns];

  void update_step(Changes& c, int64_t step);
  // The row from the columns' texts: the last row written over in place when every changed
  // column kept its length, else column by column.
  char* emit(char* p, Changes c);
};

// One line, '\n'-terminated, at p (begin_row); returns its end.
char* put_request_row(char* p, const RequestRecord& r, std::string_view reject_reason);

}  // namespace kvsim::detail
