#include "kvsim/sim/engine/profile_tables.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kvsim/sim/io/csv.h"
#include "kvsim/sim/io/line_reader.h"
#include "kvsim/sim/io/parse_number.h"

namespace kvsim {
namespace {

constexpr int64_t kMaxTableBytes = int64_t{64} << 20;  // the largest published table is 1.2 MB

// A CSV file with a header row, read row by row with every field checked where it is used.
class Table {
 public:
  explicit Table(const std::string& path) : path_(path), reader_(open(path)) {
    std::string_view line;
    while (reader_.next(line) && line.empty()) {
    }
    if (line.empty()) fail_file("empty file (expected a header row)");
    split(line);
    for (size_t i = 0; i < splitter_.fields().size(); ++i) {
      const std::string name(splitter_.fields()[i]);
      if (!name.empty() && !columns_.emplace(name, i).second) {
        fail_field(i, fmt::format("column \"{}\" appears twice in the header", name));
      }
      names_.push_back(name);
    }
  }

  std::optional<size_t> find(std::string_view name) const {
    const auto it = columns_.find(std::string(name));
    if (it == columns_.end()) return std::nullopt;
    return it->second;
  }
  size_t column(std::string_view name) const {
    const auto c = find(name);
    if (!c) fail_file(fmt::format("missing column \"{}\"", name));
    return *c;
  }

  // The next non-blank row; false at the end of the file.
  bool next() {
    std::string_view line;
    while (reader_.next(line)) {
      if (line.empty()) continue;
      split(line);
      if (splitter_.fields().size() != names_.size()) {
        fail_row(fmt::format("expected {} fields (as in the header), got {}", names_.size(),
                             splitter_.fields().size()));
      }
      return true;
    }
    return false;
  }

  std::string_view text(size_t c) const { return splitter_.fields()[c]; }
  double time_ms(size_t c) const {
    const auto v = parse_finite_double(text(c));
    if (!v || *v < 0)
      fail_field(c, fmt::format("expected a finite number >= 0, got \"{}\"", text(c)));
    return *v;
  }
  int64_t integer(size_t c, int64_t min) const {
    int64_t v = 0;
    if (parse_integer(text(c), v) != ParseStatus::kOk || v < min) {
      fail_field(c, fmt::format("expected an integer >= {}, got \"{}\"", min, text(c)));
    }
    return v;
  }

  [[noreturn]] void fail_field(size_t c, const std::string& what) const {
    throw std::invalid_argument(fmt::format("{}:{}:{}: {}{}", path_, reader_.line_number(), c + 1,
                                            c < names_.size() && !names_[c].empty()
                                                ? fmt::format("column \"{}\": ", names_[c])
                                                : std::string(),
                                            what));
  }
  [[noreturn]] void fail_row(const std::string& what) const {
    throw std::invalid_argument(fmt::format("{}:{}: {}", path_, reader_.line_number(), what));
  }
  [[noreturn]] void fail_file(const std::string& what) const {
    throw std::invalid_argument(fmt::format("{}: {}", path_, what));
  }
  int64_t line_number() const { return reader_.line_number(); }

 private:
  static LineReader open(const std::string& path) {
    if (!std::filesystem::is_regular_file(path)) {
      throw std::invalid_argument(fmt::format("{}: not a readable file", path));
    }
    InputLimits limits;
    limits.max_bytes = kMaxTableBytes;
    limits.has_flags = false;
    return LineReader(path, limits);
  }
  void split(std::string_view line) {
    const std::string problem = splitter_.split(line);
    if (!problem.empty()) fail_row(problem);
  }

  std::string path_;
  LineReader reader_;
  csv::Splitter splitter_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, size_t> columns_;
};

// Points grouped by key, for one PiecewiseLinear per key.
using Groups = std::map<int32_t, std::vector<std::pair<double, double>>>;

std::map<int32_t, PiecewiseLinear> curves(Groups groups) {
  std::map<int32_t, PiecewiseLinear> out;
  for (auto& [key, points] : groups) out.emplace(key, PiecewiseLinear(std::move(points)));
  return out;
}

}  // namespace

PiecewiseLinear::PiecewiseLinear(std::vector<std::pair<double, double>> points) {
  if (points.empty()) throw std::invalid_argument("a profile curve needs at least one point");
  for (const auto& [x, y] : points) {
    if (!std::isfinite(x) || !std::isfinite(y) || x < 0 || y < 0) {
      throw std::invalid_argument(fmt::format("bad profile point ({}, {})", x, y));
    }
  }
  std::stable_sort(points.begin(), points.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < points.size();) {
    size_t j = i;
    double sum = 0;
    for (; j < points.size() && points[j].first == points[i].first; ++j) sum += points[j].second;
    xs_.push_back(points[i].first);
    ys_.push_back(sum / static_cast<double>(j - i));
    i = j;
  }
  if (xs_.size() >= 2) {
    const double half = xs_.back() / 2;
    // The largest x at or below half the last one (the first x when none is).
    auto it = std::upper_bound(xs_.begin(), xs_.end() - 1, half);
    const size_t lo = it == xs_.begin() ? 0 : static_cast<size_t>(it - xs_.begin()) - 1;
    const size_t hi = xs_.size() - 1;
    tail_slope_ = std::max(0.0, (ys_[hi] - ys_[lo]) / (xs_[hi] - xs_[lo]));
  }
}

double PiecewiseLinear::operator()(double x) const noexcept {
  if (x <= xs_.front()) return ys_.front();
  if (x >= xs_.back()) return ys_.back() + tail_slope_ * (x - xs_.back());
  const size_t hi = static_cast<size_t>(std::upper_bound(xs_.begin(), xs_.end(), x) - xs_.begin());
  const size_t lo = hi - 1;
  const double f = (x - xs_[lo]) / (xs_[hi] - xs_[lo]);
  return ys_[lo] + f * (ys_[hi] - ys_[lo]);
}

OperatorProfile read_operator_profile(const std::string& path) {
  Table t(path);
  std::vector<size_t> op_columns;
  for (const std::string_view op : kProfileLayerOps) {
    op_columns.push_back(t.column(fmt::format("time_stats.{}.median", op)));
  }
  const size_t tokens = t.column("num_tokens");
  const size_t tp = t.column("num_tensor_parallel_workers");
  const std::array<std::string_view, 5> shape_names = {"n_head", "n_kv_head", "n_embd",
                                                       "n_expanded_embd", "vocab_size"};
  std::array<size_t, 5> shape_columns{};
  for (size_t i = 0; i < shape_names.size(); ++i) shape_columns[i] = t.column(shape_names[i]);
  const size_t gated = t.column("use_gated_mlp");

  OperatorProfile p;
  p.path = path;
  std::array<int64_t, 5> shape{};
  int64_t first_line = 0;
  Groups groups;
  while (t.next()) {
    for (size_t i = 0; i < shape.size(); ++i) {
      const int64_t v = t.integer(shape_columns[i], 1);
      if (first_line == 0) {
        shape[i] = v;
      } else if (v != shape[i]) {
        t.fail_field(shape_columns[i],
                     fmt::format("{} differs from line {}'s {} (one table holds one model)", v,
                                 first_line, shape[i]));
      }
    }
    const std::string_view g = t.text(gated);
    if (g != "True" && g != "False") {
      t.fail_field(gated, fmt::format("expected True or False, got \"{}\"", g));
    }
    if (first_line == 0) {
      p.use_gated_mlp = g == "True";
    } else if ((g == "True") != p.use_gated_mlp) {
      t.fail_field(gated,
                   fmt::format("differs from line {} (one table holds one model)", first_line));
    }
    if (first_line == 0) first_line = t.line_number();
    double layer_ms = 0;
    for (const size_t c : op_columns) layer_ms += t.time_ms(c);
    const int64_t n = t.integer(tokens, 1);
    const int64_t workers = t.integer(tp, 1);
    if (workers > 4096) t.fail_field(tp, "more than 4096 tensor-parallel workers");
    groups[static_cast<int32_t>(workers)].emplace_back(static_cast<double>(n), layer_ms);
    p.max_tokens = std::max(p.max_tokens, n);
  }
  if (groups.empty()) t.fail_file("no data rows");
  p.n_head = shape[0];
  p.n_kv_head = shape[1];
  p.n_embd = shape[2];
  p.n_expanded_embd = shape[3];
  p.vocab_size = shape[4];
  p.layer_ms = curves(std::move(groups));
  return p;
}

AllReduceProfile read_all_reduce_profile(const std::string& path) {
  Table t(path);
  const size_t ms = t.column("time_stats.all_reduce.median");
  const size_t size = t.column("size");
  const size_t workers = t.column("num_workers");
  const std::optional<size_t> per_node = t.find("devices_per_node");
  const std::optional<size_t> collective = t.find("collective");
  Groups groups;
  while (t.next()) {
    const int64_t w = t.integer(workers, 1);
    if (w > 4096) t.fail_field(workers, "more than 4096 workers");
    const int64_t bytes = t.integer(size, 1);
    const double v = t.time_ms(ms);
    if (collective && t.text(*collective) != "all_reduce") continue;
    if (per_node && t.integer(*per_node, 1) != w) continue;
    groups[static_cast<int32_t>(w)].emplace_back(static_cast<double>(bytes), v);
  }
  if (groups.empty()) {
    t.fail_file("no all_reduce rows with devices_per_node == num_workers (one node)");
  }
  AllReduceProfile p;
  p.path = path;
  p.ms_by_workers = curves(std::move(groups));
  return p;
}

}  // namespace kvsim
