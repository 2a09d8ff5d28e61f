// kvsim sweep --merge: consistency of the rows read back from shard CSVs.
#include "sweep_merge_checks.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/core.h>

#include "kvsim/core/param.h"
#include "kvsim/sim/io/parse_number.h"

namespace kvsim {
namespace {

int64_t integer(std::string_view v) {
  return parse_integer<int64_t>(v).value_or(0);
}
double number(std::string_view v) {
  return parse_finite_double(v).value_or(0.0);
}

}  // namespace

std::string sweep_row_contradiction(std::span<const std::string_view> f) {
  using namespace sweep_col;
  const int64_t bs = integer(f[kBlockSize]);
  // Written as {:.6g} of (bs - 1) / 2, so the text must match exactly.
  const std::string uniform = fmt::format("{:.6g}", static_cast<double>(bs - 1) / 2.0);
  if (f[kExpectedUniform] != uniform) {
    return fmt::format("expected_padding_per_seq_uniform {} is not (block_size {} - 1) / 2 = {}",
                       f[kExpectedUniform], bs, uniform);
  }
  const int64_t requests = integer(f[kRequests]);
  const int64_t finished = integer(f[kFinished]);
  const int64_t rejected = integer(f[kRejected]);
  if (finished > requests || rejected > requests - finished) {
    return fmt::format("finished {} + rejected {} is more than its requests {}", finished, rejected,
                       requests);
  }
  if (integer(f[kPeakRunning]) > integer(f[kMaxNumSeqs])) {
    return fmt::format("peak_running {} is above its max_num_seqs {}", f[kPeakRunning],
                       f[kMaxNumSeqs]);
  }
  // Both operands and the result carry 6 significant digits: allow their rounding (< 2e-5).
  const double mean_running = number(f[kMeanRunning]);
  const double want = mean_running > 0 ? number(f[kPaddingMean]) / mean_running : 0.0;
  const double got = number(f[kPaddingPerSeq]);
  if (std::abs(got - want) > 1e-4 * std::max(std::abs(want), 1e-3)) {
    return fmt::format(
        "padding_tokens_per_seq {} is not padding_tokens_mean {} / mean_running {} = {:.6g}",
        f[kPaddingPerSeq], f[kPaddingMean], f[kMeanRunning], want);
  }
  return "";
}

std::string SweepRowAgreement::add(std::span<const std::string_view> f, const std::string& where) {
  using namespace sweep_col;
  if (requests_.empty()) {
    requests_ = std::string(f[kRequests]);
    requests_where_ = where;
  } else if (f[kRequests] != requests_) {
    return fmt::format("requests {} differs from {} in {} (one sweep replays one trace)",
                       f[kRequests], requests_, requests_where_);
  }
  const int64_t bs = integer(f[kBlockSize]);
  block_size_of_[integer(f[kIndex])] = bs;
  const auto [it, added] = by_block_size_.emplace(
      bs, Padding{std::string(f[kExpectedPerSeq]), std::string(f[kExpectedFraction]), where});
  const Padding& p = it->second;
  if (!added && (f[kExpectedPerSeq] != p.per_seq || f[kExpectedFraction] != p.fraction)) {
    return fmt::format(
        "expected_padding_per_seq {} / expected_padding_fraction {} at block_size {} differ from "
        "{} / {} in {} (they depend only on the trace and the block size)",
        f[kExpectedPerSeq], f[kExpectedFraction], bs, p.per_seq, p.fraction, p.where);
  }
  return "";
}

std::string SweepRowAgreement::grid_layout(const std::map<int64_t, std::string>& where_of) const {
  const auto where = [&](int64_t index) {
    const auto it = where_of.find(index);
    return it == where_of.end() ? param("merge") : it->second;
  };
  const auto n = static_cast<int64_t>(block_size_of_.size());
  std::map<int64_t, int64_t> rows_of;  // block size -> rows
  for (const auto& [index, bs] : block_size_of_) ++rows_of[bs];
  const auto b = static_cast<int64_t>(rows_of.size());
  if (b == 0) return "";
  const auto [fewest, most] =
      std::minmax_element(rows_of.begin(), rows_of.end(),
                          [](const auto& x, const auto& y) { return x.second < y.second; });
  if (fewest->second != most->second) {
    for (const auto& [index, bs] : block_size_of_) {
      if (bs != fewest->first) continue;
      return fmt::format(
          "{}: block_size {} is on {} row(s), block_size {} on {}: block size is the grid's "
          "outermost axis, so every block size has the same number of rows",
          where(index), bs, fewest->second, most->first, most->second);
    }
  }
  const int64_t run = n / b;  // consecutive indices per block size
  for (const auto& [index, bs] : block_size_of_) {
    const int64_t first = index / run * run;
    const int64_t want = block_size_of_.at(first);
    if (bs != want) {
      return fmt::format(
          "{}: block_size {} at config_index {}, but config_index {}..{} (one block size of the "
          "grid's outermost axis) start with block_size {} in {}",
          where(index), bs, index, first, first + run - 1, want, where(first));
    }
  }
  return "";
}

}  // namespace kvsim
