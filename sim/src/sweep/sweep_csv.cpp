// Sweep CSV writing, shard merging and the printed table.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "kvsim/core/param.h"
#include "kvsim/sim/io/csv.h"
#include "kvsim/sim/io/parse_number.h"
#include "kvsim/sim/sweep/sweep.h"
#include "sweep_merge_checks.h"

namespace kvsim {
namespace {

// Column types, for --merge's validation of every field. kIndex: a canonical non-negative integer
// (no sign, no leading zero); kId: 16 lowercase hex digits; kNumber: a finite decimal number;
// kNumberOrEmpty: the same or empty; kText: any CSV field (quoted when it holds , " or newline).
enum class Col { kIndex, kId, kNumber, kNumberOrEmpty, kText };

struct Column {
  std::string_view name;
  Col type;
};

constexpr Column kColumns[] = {
    {"config_index", Col::kIndex},
    {"num_configs", Col::kIndex},
    {"sweep_id", Col::kId},
    {"block_size", Col::kIndex},
    {"num_gpu_blocks", Col::kIndex},
    {"gpu_memory_utilization", Col::kNumberOrEmpty},
    {"kv_cache_dtype", Col::kText},
    {"max_num_seqs", Col::kIndex},
    {"max_num_batched_tokens", Col::kIndex},
    {"vllm_max_concurrency", Col::kNumber},
    {"formula_max_concurrency", Col::kIndex},
    {"requests", Col::kIndex},
    {"finished", Col::kIndex},
    {"rejected", Col::kIndex},
    {"steps", Col::kIndex},
    {"sim_seconds", Col::kNumber},
    {"peak_running", Col::kIndex},
    {"mean_running", Col::kNumber},
    {"preemptions", Col::kIndex},
    {"recomputed_tokens", Col::kIndex},
    {"padding_tokens_mean", Col::kNumber},
    {"padding_tokens_per_seq", Col::kNumber},
    {"expected_padding_per_seq", Col::kNumber},
    {"expected_padding_per_seq_uniform", Col::kNumber},
    {"padding_fraction_mean", Col::kNumber},
    {"expected_padding_fraction", Col::kNumber},
    {"peak_kv_usage", Col::kNumber},
    {"prefix_cache_hit_rate", Col::kNumber},
    {"ttft_p50_s", Col::kNumber},
    {"ttft_p99_s", Col::kNumber},
    {"tpot_p50_s", Col::kNumber},
    {"tpot_p99_s", Col::kNumber},
};
constexpr size_t kNumColumns = std::size(kColumns);
// The positions sweep_merge_checks.cpp reads.
static_assert(kColumns[sweep_col::kIndex].name == "config_index");
static_assert(kColumns[sweep_col::kBlockSize].name == "block_size");
static_assert(kColumns[sweep_col::kMaxNumSeqs].name == "max_num_seqs");
static_assert(kColumns[sweep_col::kRequests].name == "requests");
static_assert(kColumns[sweep_col::kFinished].name == "finished");
static_assert(kColumns[sweep_col::kRejected].name == "rejected");
static_assert(kColumns[sweep_col::kPeakRunning].name == "peak_running");
static_assert(kColumns[sweep_col::kMeanRunning].name == "mean_running");
static_assert(kColumns[sweep_col::kPaddingMean].name == "padding_tokens_mean");
static_assert(kColumns[sweep_col::kPaddingPerSeq].name == "padding_tokens_per_seq");
static_assert(kColumns[sweep_col::kExpectedPerSeq].name == "expected_padding_per_seq");
static_assert(kColumns[sweep_col::kExpectedUniform].name == "expected_padding_per_seq_uniform");
static_assert(kColumns[sweep_col::kExpectedFraction].name == "expected_padding_fraction");

std::string make_header() {
  std::string h;
  for (const Column& c : kColumns) {
    if (!h.empty()) h += ',';
    h += c.name;
  }
  return h;
}

// Six significant digits: deterministic (fmt is locale-independent) and plenty for a plot.
std::string num(double v) {
  return fmt::format("{:.6g}", v);
}

// Measured padding per live sequence: a ratio of the two step means.
double padding_per_seq(const SweepOutcome& o) {
  return o.mean_running > 0 ? o.padding_tokens_mean / o.mean_running : 0.0;
}

// "" when `v` is a valid value of column type `t`, else what is wrong.
std::string check_field(Col t, std::string_view v) {
  switch (t) {
    case Col::kIndex:
      // Canonical digits only (no sign, no leading zero), as kvsim writes them.
      if (v.empty() || v[0] == '+' || v[0] == '-' || (v.size() > 1 && v[0] == '0') ||
          !parse_integer<int64_t>(v)) {
        return "not a non-negative integer";
      }
      return "";
    case Col::kId:
      if (v.size() != 16 || v.find_first_not_of("0123456789abcdef") != std::string_view::npos) {
        return "not a 16-digit hex sweep id";
      }
      return "";
    case Col::kNumberOrEmpty:
      if (v.empty()) return "";
      [[fallthrough]];
    case Col::kNumber:
      return parse_finite_double(v) ? "" : "not a finite number";
    case Col::kText:
      return "";
  }
  return "";
}

}  // namespace

std::string sweep_csv_header() {
  return make_header();
}

uint64_t sweep_fingerprint(std::string_view canonical) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64: stable across builds and platforms
  for (unsigned char c : canonical) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

void write_sweep_csv(std::ostream& out, std::span<const SweepRow> rows, int64_t num_configs,
                     uint64_t sweep_id) {
  out << make_header() << '\n';
  const std::string id = fmt::format("{:016x}", sweep_id);
  for (const SweepRow& r : rows) {
    const SweepOutcome& o = r.outcome;
    out << fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},"
        "{},{}\n",
        r.point.index, num_configs, id, o.block_size, o.num_gpu_blocks,
        o.gpu_memory_utilization > 0 ? num(o.gpu_memory_utilization) : "",
        csv::quote_field(o.kv_cache_dtype), o.max_num_seqs, o.max_num_batched_tokens,
        num(o.vllm_max_concurrency), o.formula_max_concurrency, o.requests, o.finished, o.rejected,
        o.steps, num(o.sim_seconds), o.peak_running, num(o.mean_running), o.preemptions,
        o.recomputed_tokens, num(o.padding_tokens_mean), num(padding_per_seq(o)),
        num(r.expected.per_seq), num(r.expected.uniform_per_seq), num(o.padding_fraction_mean),
        num(r.expected.fraction), num(o.peak_kv_usage), num(o.prefix_cache_hit_rate),
        num(o.ttft_p50_s), num(o.ttft_p99_s), num(o.tpot_p50_s), num(o.tpot_p99_s));
  }
}

std::string merge_sweep_csvs(std::span<const NamedText> shards) {
  if (shards.empty()) throw std::invalid_argument(param("merge") + ": no input files");
  const std::string header = make_header();
  std::map<int64_t, std::string> rows;  // config index -> line
  std::map<int64_t, std::string> where;
  int64_t num_configs = -1;
  std::string sweep_id;
  std::string first_from;  // file:line that fixed num_configs and sweep_id
  SweepRowAgreement agreement;
  csv::Splitter splitter;
  const std::vector<std::string_view>& fields = splitter.fields();
  for (const NamedText& shard : shards) {
    std::string_view text = shard.text;
    int64_t line_no = 0;
    if (text.empty()) {
      throw std::invalid_argument(
          fmt::format("{}: {}: empty file (no header)", param("merge"), shard.name));
    }
    if (text.back() != '\n') {
      // Every line kvsim writes ends in a newline: a missing one means a cut-off file.
      const int64_t last = std::count(text.begin(), text.end(), '\n') + 1;
      throw std::invalid_argument(
          fmt::format("{}: {}:{}: last line has no newline (truncated file?)", param("merge"),
                      shard.name, last));
    }
    while (!text.empty()) {
      const auto nl = text.find('\n');
      const std::string_view line = text.substr(0, nl);
      text = text.substr(nl + 1);
      ++line_no;
      const auto at = [&](std::string_view problem) {
        return std::invalid_argument(
            fmt::format("{}: {}:{}: {}", param("merge"), shard.name, line_no, problem));
      };
      if (line_no == 1) {
        if (line != header) {
          throw at(
              "header differs from kvsim sweep's (a different kvsim version, or not a "
              "sweep CSV)");
        }
        continue;
      }
      if (line.empty()) throw at("empty line");
      if (const std::string err = splitter.split(line); !err.empty()) throw at(err);
      if (fields.size() != kNumColumns) {
        throw at(fmt::format("{} fields, the header has {}", fields.size(), kNumColumns));
      }
      for (size_t c = 0; c < kNumColumns; ++c) {
        if (const std::string err = check_field(kColumns[c].type, fields[c]); !err.empty()) {
          throw at(fmt::format("column {} ({}): {} (got '{}')", c + 1, kColumns[c].name, err,
                               fields[c]));
        }
      }
      // Both checked as kIndex above.
      const int64_t index = *parse_integer<int64_t>(fields[0]);
      const int64_t count = *parse_integer<int64_t>(fields[1]);
      if (num_configs < 0) {
        num_configs = count;
        sweep_id = std::string(fields[2]);
        first_from = fmt::format("{}:{}", shard.name, line_no);
      } else if (count != num_configs) {
        throw at(fmt::format("num_configs {} differs from {} in {} (shards of different sweeps?)",
                             count, num_configs, first_from));
      } else if (fields[2] != sweep_id) {
        throw at(fmt::format(
            "sweep_id {} differs from {} in {}: shards of different sweeps (trace, model/card, "
            "scheduler flags and grid must be the same)",
            fields[2], sweep_id, first_from));
      }
      if (index >= count) {
        throw at(fmt::format("config_index {} out of range [0, {})", index, count));
      }
      const std::string here = fmt::format("{}:{}", shard.name, line_no);
      // Rows that contradict themselves or the sweep they claim (edited or corrupt).
      std::string contradiction = sweep_row_contradiction(fields);
      if (contradiction.empty() && !where.contains(index)) {
        contradiction = agreement.add(fields, here);
      }
      if (!contradiction.empty()) {
        throw at(contradiction + "; refusing to merge an edited or corrupt row");
      }
      if (!rows.emplace(index, std::string(line)).second) {
        throw at(fmt::format("config_index {} already given in {}", index, where[index]));
      }
      where[index] = here;
    }
  }
  if (num_configs >= 0 && static_cast<int64_t>(rows.size()) != num_configs) {
    std::string missing;
    int64_t shown = 0;
    for (int64_t i = 0; i < num_configs && shown < 10; ++i) {
      if (!rows.count(i)) {
        missing += fmt::format("{}{}", shown ? "," : "", i);
        ++shown;
      }
    }
    throw std::invalid_argument(fmt::format(
        "{}: {} of {} configs missing (first: {}); a shard did not run?", param("merge"),
        num_configs - static_cast<int64_t>(rows.size()), num_configs, missing));
  }
  if (const std::string err = agreement.grid_layout(where); !err.empty()) {
    throw std::invalid_argument(
        fmt::format("{}: {}; refusing to merge an edited or corrupt row", param("merge"), err));
  }
  std::string out = header;
  out += '\n';
  for (const auto& [index, line] : rows) {
    out += line;
    out += '\n';
  }
  return out;
}

std::string format_sweep_table(std::span<const SweepRow> rows) {
  std::string out = fmt::format(
      "{:>4} {:>5} {:>9} {:>9} {:>5} {:>6} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>8} {:>6} "
      "{:>8} {:>8} {:>8}\n",
      "#", "bs", "blocks", "kv_dtype", "seqs", "budget", "conc", "peak", "mean", "pad%", "pad%exp",
      "pad/seq", "exp/seq", "preem", "hit%", "ttft50", "ttft99");
  for (const SweepRow& r : rows) {
    const SweepOutcome& o = r.outcome;
    out += fmt::format(
        "{:>4} {:>5} {:>9} {:>9} {:>5} {:>6} {:>7.2f} {:>7} {:>7.1f} {:>7.3f} {:>8.3f} {:>8.2f} "
        "{:>8.2f} {:>6} {:>8.2f} {:>8.3f} {:>8.3f}\n",
        r.point.index, o.block_size, o.num_gpu_blocks, o.kv_cache_dtype, o.max_num_seqs,
        o.max_num_batched_tokens, o.vllm_max_concurrency, o.peak_running, o.mean_running,
        100 * o.padding_fraction_mean, 100 * r.expected.fraction, padding_per_seq(o),
        r.expected.per_seq, o.preemptions, 100 * o.prefix_cache_hit_rate, o.ttft_p50_s,
        o.ttft_p99_s);
  }
  return out;
}

}  // namespace kvsim
