// Sweep CSV writing, shard merging and the printed table.
#include <algorithm>
#include <charconv>
#include <map>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "kvsim/sim/sweep.h"

namespace kvsim {
namespace {

constexpr std::string_view kHeader =
    "config_index,num_configs,block_size,num_gpu_blocks,gpu_memory_utilization,kv_cache_dtype,"
    "max_num_seqs,max_num_batched_tokens,vllm_max_concurrency,formula_max_concurrency,requests,"
    "finished,rejected,steps,sim_seconds,peak_running,mean_running,preemptions,recomputed_tokens,"
    "padding_tokens_mean,padding_tokens_per_seq,expected_padding_per_seq,"
    "expected_padding_per_seq_uniform,padding_fraction_mean,expected_padding_fraction,"
    "peak_kv_usage,prefix_cache_hit_rate,ttft_p50_s,ttft_p99_s,tpot_p50_s,tpot_p99_s";

// Six significant digits: deterministic (fmt is locale-independent) and plenty for a plot.
std::string num(double v) {
  return fmt::format("{:.6g}", v);
}

// Measured padding per live sequence: a ratio of the two step means.
double padding_per_seq(const SweepOutcome& o) {
  return o.mean_running > 0 ? o.padding_tokens_mean / o.mean_running : 0.0;
}

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\n") == std::string_view::npos) return std::string(s);
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + '"';
}

}  // namespace

std::string sweep_csv_header() {
  return std::string(kHeader);
}

void write_sweep_csv(std::ostream& out, std::span<const SweepRow> rows, int64_t num_configs) {
  out << kHeader << '\n';
  for (const SweepRow& r : rows) {
    const SweepOutcome& o = r.outcome;
    out << fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},"
        "{}\n",
        r.point.index, num_configs, o.block_size, o.num_gpu_blocks,
        o.gpu_memory_utilization > 0 ? num(o.gpu_memory_utilization) : "",
        csv_field(o.kv_cache_dtype), o.max_num_seqs, o.max_num_batched_tokens,
        num(o.vllm_max_concurrency), o.formula_max_concurrency, o.requests, o.finished, o.rejected,
        o.steps, num(o.sim_seconds), o.peak_running, num(o.mean_running), o.preemptions,
        o.recomputed_tokens, num(o.padding_tokens_mean), num(padding_per_seq(o)),
        num(r.expected.per_seq), num(r.expected.uniform_per_seq), num(o.padding_fraction_mean),
        num(r.expected.fraction), num(o.peak_kv_usage), num(o.prefix_cache_hit_rate),
        num(o.ttft_p50_s), num(o.ttft_p99_s), num(o.tpot_p50_s), num(o.tpot_p99_s));
  }
}

std::string merge_sweep_csvs(std::span<const NamedText> shards) {
  if (shards.empty()) throw std::invalid_argument("--merge: no input files");
  std::map<int64_t, std::string> rows;  // config index -> line
  std::map<int64_t, std::string> where;
  int64_t num_configs = -1;
  std::string num_configs_from;
  for (const NamedText& shard : shards) {
    std::string_view text = shard.text;
    int64_t line_no = 0;
    while (!text.empty()) {
      const auto nl = text.find('\n');
      const std::string_view line = text.substr(0, nl);
      text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
      ++line_no;
      const auto at = [&](std::string_view problem) {
        return std::invalid_argument(
            fmt::format("--merge: {}:{}: {}", shard.name, line_no, problem));
      };
      if (line_no == 1) {
        if (line != kHeader) {
          throw at(
              "header differs from kvsim sweep's (a different kvsim version, or not a "
              "sweep CSV)");
        }
        continue;
      }
      if (line.empty()) throw at("empty line");
      // Fields 1 and 2: config_index, num_configs.
      const auto c1 = line.find(',');
      const auto c2 = c1 == std::string_view::npos ? c1 : line.find(',', c1 + 1);
      if (c2 == std::string_view::npos) throw at("expected config_index,num_configs,...");
      const auto parse = [&](std::string_view field, std::string_view name) {
        int64_t v = 0;
        const auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
        if (field.empty() || ec != std::errc{} || ptr != field.data() + field.size() || v < 0) {
          throw at(fmt::format("field '{}': not a non-negative integer (got '{}')", name, field));
        }
        return v;
      };
      const int64_t index = parse(line.substr(0, c1), "config_index");
      const int64_t count = parse(line.substr(c1 + 1, c2 - c1 - 1), "num_configs");
      if (num_configs < 0) {
        num_configs = count;
        num_configs_from = fmt::format("{}:{}", shard.name, line_no);
      } else if (count != num_configs) {
        throw at(fmt::format("num_configs {} differs from {} in {} (shards of different sweeps?)",
                             count, num_configs, num_configs_from));
      }
      if (index >= count) {
        throw at(fmt::format("config_index {} out of range [0, {})", index, count));
      }
      const std::string here = fmt::format("{}:{}", shard.name, line_no);
      if (!rows.emplace(index, std::string(line)).second) {
        throw at(fmt::format("config_index {} already given in {}", index, where[index]));
      }
      where[index] = here;
    }
    if (line_no == 0) {
      throw std::invalid_argument(fmt::format("--merge: {}: empty file (no header)", shard.name));
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
    throw std::invalid_argument(
        fmt::format("--merge: {} of {} configs missing (first: {}); a shard did not run?",
                    num_configs - static_cast<int64_t>(rows.size()), num_configs, missing));
  }
  std::string out(kHeader);
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
