// Measured operator tables in Vidur's published layout (calibration/vidur/README.md), read
// strictly and turned into piecewise-linear curves for ProfileStepTime (profile_step_time.h).
//
// Both readers throw std::invalid_argument naming the place: "FILE:LINE:COLUMN: what" for a bad
// field (COLUMN = 1-based field number, with the column's name in the message), "FILE:LINE:
// what" for a bad row, "FILE: what" for a missing file or column.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvsim {

// y(x) through measured points (x > 0, y finite >= 0):
//   * at a measured x: its y exactly (the mean of the ys when an x was measured more than once);
//   * between two measured xs: linear interpolation;
//   * below the first x: the first y (a kernel does not get cheaper than its smallest profile);
//   * beyond the last x: linear extrapolation along the secant from the largest measured x at or
//     below half the last x to the last x, with the slope floored at 0. Not the last two points:
//     in Vidur's tables they are 32 tokens (or 128 KiB) apart and differ by less than the
//     measurement noise, so their slope can be flat or negative.
// Invariant: xs() strictly increasing and non-empty; ys() the same size; both finite.
class PiecewiseLinear {
 public:
  // Throws std::invalid_argument when points is empty or holds a non-finite or negative value.
  explicit PiecewiseLinear(std::vector<std::pair<double, double>> points);
  double operator()(double x) const noexcept;
  const std::vector<double>& xs() const noexcept { return xs_; }
  const std::vector<double>& ys() const noexcept { return ys_; }

 private:
  std::vector<double> xs_, ys_;
  double tail_slope_ = 0;  // per unit x beyond xs_.back()
};

// The per-layer operators summed by ProfileStepTime, in the table's column names
// (time_stats.<op>.median). `emb` is per step, not per layer, and left out (as Vidur does).
inline constexpr std::array<std::string_view, 9> kProfileLayerOps = {"input_layernorm",
                                                                     "attn_pre_proj",
                                                                     "attn_rope",
                                                                     "attn_post_proj",
                                                                     "post_attention_layernorm",
                                                                     "mlp_up_proj",
                                                                     "mlp_act",
                                                                     "mlp_down_proj",
                                                                     "add"};

// mlp.csv: one model on one card. Every row must hold the same shape columns.
struct OperatorProfile {
  std::string path;
  int64_t n_head = 0, n_kv_head = 0, n_embd = 0, n_expanded_embd = 0, vocab_size = 0;
  bool use_gated_mlp = true;
  // By num_tensor_parallel_workers: milliseconds of one layer (the kProfileLayerOps' medians
  // summed per row) against num_tokens.
  std::map<int32_t, PiecewiseLinear> layer_ms;
  int64_t max_tokens = 0;  // the largest num_tokens profiled (extrapolated beyond it)
};
OperatorProfile read_operator_profile(const std::string& path);

// all_reduce.csv: by num_workers, the median milliseconds against the message size in bytes.
// Rows whose `collective` is not all_reduce, or whose `devices_per_node` differs from
// num_workers (groups spanning nodes), are skipped when those columns exist: tensor parallelism
// runs within one node, as Vidur selects them.
struct AllReduceProfile {
  std::string path;
  std::map<int32_t, PiecewiseLinear> ms_by_workers;
};
AllReduceProfile read_all_reduce_profile(const std::string& path);

// "1, 2, 4" for the error that refuses a TP a table lacks.
template <class V>
std::string profile_keys(const std::map<int32_t, V>& m) {
  std::string s;
  for (const auto& [k, v] : m) s += (s.empty() ? "" : ", ") + std::to_string(k);
  return s;
}

}  // namespace kvsim
