// kvsim size: the CSV and the ranked text table.
#include <string>

#include <fmt/core.h>

#include "kvsim/sim/io/csv.h"
#include "kvsim/sim/sweep/size_report.h"

namespace kvsim {
namespace {

std::string dtype_of(const SizeResult& r) {
  return r.kv_cache_dtype.empty() ? r.candidate.kv_cache_dtype : r.kv_cache_dtype;
}

// A measured value, or "" for a candidate that never ran.
std::string measured(const SizeResult& r, double v) {
  return r.trials.empty() ? std::string() : fmt::format("{}", v);
}

std::string slo_text(const SloSpec& slo) {
  std::string s;
  const auto add = [&](const char* name, const std::optional<double>& v) {
    if (v) s += fmt::format("{}{} p99 <= {} s", s.empty() ? "" : ", ", name, *v);
  };
  add("TTFT", slo.ttft_s);
  add("TPOT", slo.tpot_s);
  add("e2e", slo.e2e_s);
  return s;
}

}  // namespace

std::string size_csv_header() {
  return "rank,candidate_index,gpu,tp,kv_cache_dtype,block_size,max_num_seqs,"
         "max_num_batched_tokens,num_gpu_blocks,replicas,gpus,price_per_gpu_hour,cost_per_hour,"
         "feasible,verdict,ttft_p99_s,tpot_p99_s,e2e_p99_s,slo_attainment,"
         "mean_running_per_replica,formula_max_concurrency,vllm_max_concurrency,trials,reason,"
         "replay_command\n";
}

std::string size_csv(std::span<const SizeResult> results) {
  std::string out = size_csv_header();
  for (size_t i = 0; i < results.size(); ++i) {
    const SizeResult& r = results[i];
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", i + 1,
        r.candidate.index, r.candidate.gpu, r.candidate.tensor_parallel_size,
        csv::quote_field(dtype_of(r)), r.block_size, r.max_num_seqs, r.max_num_batched_tokens,
        r.num_gpu_blocks, r.replicas, r.gpus(), r.price_per_gpu_hour, r.cost_per_hour,
        r.feasible() ? "true" : "false", to_string(r.verdict), measured(r, r.reported.ttft_p99_s),
        measured(r, r.reported.tpot_p99_s), measured(r, r.reported.e2e_p99_s),
        measured(r, r.reported.slo_attainment), measured(r, r.reported.mean_running_per_replica),
        r.formula_max_concurrency, r.vllm_max_concurrency, r.trials.size(),
        csv::quote_field(r.reason), csv::quote_field(r.replay_command));
  }
  return out;
}

std::string format_size_table(const SizeReportContext& ctx, std::span<const SizeResult> results) {
  std::string out = fmt::format(
      "kvsim size: {} ({} requests), model {}, SLO {}, router {}, up to {} replicas\n", ctx.trace,
      ctx.requests, ctx.model, slo_text(ctx.slo), ctx.router, ctx.max_replicas);
  out += fmt::format(
      "{:>4}  {:<10} {:>3} {:<9} {:>4} {:>5} {:>8} {:>5} {:>9} {:>9} {:>9} {:>7} "
      "{:>8} {:>7}\n",
      "rank", "gpu", "tp", "kv", "bs", "seqs", "replicas", "gpus", "$/hour", "ttft_p99", "tpot_p99",
      "attain", "run/rep", "formula");
  size_t rank = 0;
  bool infeasible_header = false;
  for (const SizeResult& r : results) {
    ++rank;
    if (!r.feasible() && !infeasible_header) {
      out += "infeasible:\n";
      infeasible_header = true;
    }
    const std::string head = fmt::format("{:>4}  {:<10} {:>3} {:<9} ", rank, r.candidate.gpu,
                                         r.candidate.tensor_parallel_size, dtype_of(r));
    if (r.trials.empty()) {
      out += fmt::format(
          "{}{:>4} {:>5}  {}\n", head,
          r.candidate.block_size ? fmt::format("{}", *r.candidate.block_size) : "-",
          r.candidate.max_num_seqs ? fmt::format("{}", *r.candidate.max_num_seqs) : "-", r.reason);
      continue;
    }
    out += fmt::format(
        "{}{:>4} {:>5} {:>8} {:>5} {:>9.2f} {:>8.3f}s {:>8.4f}s {:>6.1f}% {:>8.1f} "
        "{:>7}{}\n",
        head, r.block_size, r.max_num_seqs, r.replicas, r.gpus(), r.cost_per_hour,
        r.reported.ttft_p99_s, r.reported.tpot_p99_s, 100.0 * r.reported.slo_attainment,
        r.reported.mean_running_per_replica, r.formula_max_concurrency,
        r.feasible() ? "" : "  " + r.reason);
  }
  int64_t feasible = 0;
  for (const SizeResult& r : results) feasible += r.feasible() ? 1 : 0;
  out += fmt::format(
      "{} of {} candidates feasible. replicas = fewest that meet every p99 SLO; $/hour = replicas "
      "x tp x price per GPU-hour; run/rep = mean running sequences per replica; formula = the "
      "lesson's N_seq per replica\n",
      feasible, results.size());
  return out;
}

std::string shell_quote(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of(
                                       "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
                                       "OPQRSTUVWXYZ0123456789_-.,/:=+@%") == std::string::npos;
  if (plain) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string size_replay_command(const std::string& prefix, const std::string& router,
                                const SizeResult& r) {
  const SizeCandidate& c = r.candidate;
  std::string s = fmt::format("{} --gpu {} --tensor-parallel-size {} --kv-cache-dtype {}", prefix,
                              c.gpu, c.tensor_parallel_size, shell_quote(c.kv_cache_dtype));
  if (c.block_size) s += fmt::format(" --block-size {}", *c.block_size);
  if (c.max_num_seqs) s += fmt::format(" --max-num-seqs {}", *c.max_num_seqs);
  return s + fmt::format(" --replicas {} --router {}", r.replicas, router);
}

}  // namespace kvsim
