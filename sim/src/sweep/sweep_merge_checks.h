// kvsim sweep --merge: the checks that a shard's rows agree with themselves and with each other.
// The sweep_id only fingerprints the flags and the trace, so without these a hand-edited or
// corrupted row (a block size changed, more requests finished than the trace holds) would be
// merged as if it were a result. Fields are those of write_sweep_csv, already type-checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>

namespace kvsim {

// Positions of the columns these checks read, in sweep_csv_header()'s order (sweep_csv.cpp
// static_asserts them against its column table).
namespace sweep_col {
inline constexpr size_t kIndex = 0;
inline constexpr size_t kBlockSize = 3;
inline constexpr size_t kMaxNumSeqs = 7;
inline constexpr size_t kRequests = 11;
inline constexpr size_t kFinished = 12;
inline constexpr size_t kRejected = 13;
inline constexpr size_t kPeakRunning = 16;
inline constexpr size_t kMeanRunning = 17;
inline constexpr size_t kPaddingMean = 20;
inline constexpr size_t kPaddingPerSeq = 21;
inline constexpr size_t kExpectedPerSeq = 22;
inline constexpr size_t kExpectedUniform = 23;
inline constexpr size_t kExpectedFraction = 25;
}  // namespace sweep_col

// "" when the row's fields are consistent with each other, else what contradicts what: the
// uniform expectation is (block_size - 1) / 2, finished + rejected <= requests, peak_running
// <= max_num_seqs, padding_tokens_per_seq = padding_tokens_mean / mean_running (to the 6 digits
// written).
std::string sweep_row_contradiction(std::span<const std::string_view> fields);

// The rows of one sweep, seen one at a time: the same `requests` in every row (one trace), the
// same analytic padding for one block size (it depends only on the trace's lengths and the
// block size), and, once all are in, block sizes laid out as the grid's outermost axis (equal
// runs of consecutive indices, one run per block size).
class SweepRowAgreement {
 public:
  // "" or what contradicts an earlier row, naming it by `where` ("file:line").
  std::string add(std::span<const std::string_view> fields, const std::string& where);
  // After every row: "" or the first row whose block size breaks the grid layout, with its place
  // from `where_of` (config index -> "file:line").
  std::string grid_layout(const std::map<int64_t, std::string>& where_of) const;

 private:
  std::string requests_;
  std::string requests_where_;
  struct Padding {
    std::string per_seq;
    std::string fraction;
    std::string where;
  };
  std::map<int64_t, Padding> by_block_size_;
  std::map<int64_t, int64_t> block_size_of_;  // config index -> block size
};

}  // namespace kvsim
