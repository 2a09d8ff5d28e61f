// `kvsim plan`: the capacity arithmetic of one model on one card, printed as a table (with the
// lesson's stacked budget bar) or as one JSON object (--json; key names are relied on by other
// tools, see docs/planner.md).
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "kvsim/core/planner.h"
#include "kvsim/run/plan_job.h"
#include "plan_flags.h"

namespace kvsim::cli {
namespace {

struct PlanCommandOptions {
  run::PlanJobOptions job;
  bool json = false;
};

std::string join_layers(const std::vector<int32_t>& layers) {
  std::string out;
  for (int32_t l : layers) {
    if (!out.empty()) out.push_back(',');
    out.append(fmt::format("{}", l));
  }
  return out;
}

// Which layers hold what, and the lesson's formula with kappa split into the part that grows
// with S (full attention) and the part vLLM caps (sliding window / chunked local).
void print_hybrid(const Plan& p) {
  fmt::print("  Hybrid KV cache: hybrid manager {}\n", p.hybrid_manager_reason);
  fmt::print(
      "    in flight                  {} tokens = {} batch(es) x max_num_batched_tokens {}{}\n",
      format_thousands(p.max_in_flight_tokens), p.async_scheduling ? 2 : 1,
      format_thousands(p.max_num_batched_tokens), p.async_scheduling ? " (async scheduling)" : "");
  if (!p.hybrid_kv_cache_manager) {
    fmt::print("\n");
    return;
  }
  fmt::print("    {:<6}{:<25}{:>8}{:>5}{:>13}{:>9}  {}\n", "group", "kind", "window", "pad",
             "tokens/req", "blocks", "layers");
  for (size_t g = 0; g < p.kv_cache_groups.size(); ++g) {
    const PlanKVCacheGroup& k = p.kv_cache_groups[g];
    fmt::print("    {:<6}{:<25}{:>8}{:>5}{:>13}{:>9}  {}\n", g, to_string(k.kind),
               k.window_tokens > 0 ? format_thousands(k.window_tokens) : "-", k.num_padding_layers,
               format_thousands(k.tokens_per_request), format_thousands(k.blocks_per_request),
               join_layers(p.kv_cache_config.kv_cache_groups[g].layer_indices));
  }
  fmt::print("    pool: {} tensors (group_size), tensor i shared by layer i of every group\n",
             p.kv_cache_group_size);
  fmt::print("\n");
  fmt::print("  Lesson formula, hybrid form\n");
  fmt::print("    kappa = kappa_full + kappa_windowed = {} + {} B/token\n",
             format_thousands(p.kappa_full_bytes), format_thousands(p.kappa_windowed_bytes));
  fmt::print(
      "    KV/seq = kappa_full x S + kappa_windowed x min(cap, S) = {} B ({:.4f} GiB), "
      "cap {} tokens\n",
      format_thousands(p.hybrid_kv_per_seq_bytes),
      static_cast<double>(p.hybrid_kv_per_seq_bytes) / kGiB,
      format_thousands(p.windowed_tokens_cap));
  fmt::print(
      "    N_seq = floor(K / KV/seq)        {} concurrent sequences of {} tokens (kappa x S "
      "alone says {})\n",
      p.hybrid_max_concurrency, format_thousands(p.max_model_len), p.max_concurrency);
  if (p.hybrid_max_context_tokens) {
    fmt::print("    S_max                            {} tokens each for {} concurrent sequences\n",
               format_thousands(*p.hybrid_max_context_tokens), *p.concurrency);
  }
  fmt::print("\n");
}

// The lesson's stacked bar, laid on its side: overhead | weights | KV cache | unused margin.
std::string budget_bar(const Plan& p, int width) {
  const double total = p.vram_gib;
  const double parts[] = {p.overhead_gib, p.weights_gib, std::max(p.kv_budget_gib, 0.0),
                          std::max(total - p.usable_gib, 0.0)};
  const char glyphs[] = {'O', 'W', 'K', '.'};
  std::string bar;
  double cumulative = 0;
  for (int i = 0; i < 4; ++i) {
    cumulative += parts[i];
    const auto end = static_cast<size_t>(std::lround(std::min(cumulative / total, 1.0) * width));
    if (end > bar.size()) bar.append(end - bar.size(), glyphs[i]);
  }
  return "[" + bar + "]";
}

std::string gib(double v) {
  return fmt::format("{:.2f} GiB", v);
}

void print_human(const Plan& p, bool default_gpu) {
  fmt::print("kvsim plan: {} on {} ({} GiB{}), tensor parallel {}\n", p.model_name, p.gpu_name,
             p.vram_gib, default_gpu ? ", default card: pick one with --gpu or --vram-gib" : "",
             p.tensor_parallel_size);
  fmt::print("\n");
  fmt::print("  KV shape per GPU     {} layers x {} KV heads x {} dims, {} KV\n", p.num_layers,
             p.num_kv_heads_per_rank, p.head_dim, p.kv_cache_dtype);
  fmt::print("  kappa                {} B/token ({:.1f} KiB)\n", format_thousands(p.kappa_bytes),
             static_cast<double>(p.kappa_bytes) / 1024.0);
  fmt::print("  KV per sequence      {} B = {:.4f} GiB at max_model_len {}\n",
             format_thousands(p.kv_per_seq_bytes), static_cast<double>(p.kv_per_seq_bytes) / kGiB,
             format_thousands(p.max_model_len));
  fmt::print("\n");
  fmt::print("  VRAM budget per GPU\n");
  fmt::print("    card                       {:>10}\n", gib(p.vram_gib));
  fmt::print("    {:<27}{:>10}\n", fmt::format("usable (util {})", p.gpu_memory_utilization),
             gib(p.usable_gib));
  fmt::print("    - overhead (O)             {:>10}\n", gib(p.overhead_gib));
  if (p.weights_from_flag) {
    fmt::print("    - weights (W)              {:>10}   (--weights-gib)\n", gib(p.weights_gib));
  } else {
    fmt::print("    - weights (W)              {:>10}   ({}, {:.4g} B/param{})\n",
               gib(p.weights_gib), p.quantization, p.weight_bytes_per_param,
               p.quantization == "none" ? "" : ", embeddings in the model dtype");
  }
  fmt::print("    = KV budget (K)            {:>10}   ({} B{})\n", gib(p.kv_budget_gib),
             format_thousands(p.kv_budget_bytes),
             p.kv_cache_memory_from_flag ? ", --kv-cache-memory-bytes" : "");
  fmt::print("    {}\n", budget_bar(p, 60));
  fmt::print("     O overhead  W weights  K KV cache  . outside gpu_memory_utilization\n");
  fmt::print("\n");
  fmt::print("  Lesson formula\n");
  fmt::print("    N_seq = floor(K / (kappa x S))   {} concurrent sequences of {} tokens\n",
             p.max_concurrency, format_thousands(p.max_model_len));
  if (p.max_context_tokens) {
    fmt::print("    S_max = floor(K / (kappa x N))   {} tokens each for {} concurrent sequences\n",
               format_thousands(*p.max_context_tokens), *p.concurrency);
  }
  fmt::print("\n");
  if (p.hybrid_model) print_hybrid(p);
  fmt::print("  vLLM {} block arithmetic (block_size {})\n", release_string(p.vllm_version),
             p.block_size);
  fmt::print("    page per layer             {} B\n", format_thousands(p.page_size_bytes));
  if (p.hybrid_kv_cache_manager) {
    fmt::print("    bytes per block            {} B (page x group_size {})\n",
               format_thousands(p.bytes_per_block), p.kv_cache_group_size);
  } else {
    fmt::print("    bytes per block            {} B ({} layers)\n",
               format_thousands(p.bytes_per_block), p.num_layers);
  }
  fmt::print("    num_gpu_blocks             {}{} (usable {}: block 0 is the null block)\n",
             format_thousands(p.num_gpu_blocks),
             p.num_gpu_blocks_overridden ? " (--num-gpu-blocks-override)" : "",
             format_thousands(p.usable_blocks));
  if (p.hybrid_kv_cache_manager) {
    fmt::print("    blocks per request         {} (every group's blocks/request, summed)\n",
               format_thousands(p.blocks_per_request));
  } else {
    fmt::print("    blocks per request         {} = cdiv({}, {})\n",
               format_thousands(p.blocks_per_request), format_thousands(p.max_model_len),
               p.block_size);
  }
  if (p.vllm_max_context_tokens) {
    fmt::print("    context for {} requests    {} tokens (whole blocks from the usable pool)\n",
               *p.concurrency, format_thousands(*p.vllm_max_context_tokens));
  }
  fmt::print("\n");
  for (const std::string& line : vllm_kv_cache_report_lines(p)) fmt::print("{}\n", line);
  if (!p.notes.empty() || !p.warnings.empty()) fmt::print("\n");
  for (const std::string& n : p.notes) fmt::print("note: {}\n", n);
  for (const std::string& w : p.warnings) fmt::print("warning: {}\n", w);
}

}  // namespace

void register_plan_command(CLI::App& app) {
  auto opts = std::make_shared<PlanCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Capacity plan: KV budget, max concurrency and vLLM's num_gpu_blocks for a model");
  add_model_card_options(cmd, opts->job.plan);
  cmd->add_option("--concurrency", opts->job.concurrency,
                  "Target concurrent sequences: also report the longest context each can hold")
      ->group("Pool");
  cmd->add_option("--max-num-batched-tokens", opts->job.max_num_batched_tokens,
                  "Tokens per step (vLLM's; default: 8192 on >= 70 GiB non-A100 cards, else "
                  "2048; 0.33: 16384 on >= 160 GiB cards)")
      ->group("Scheduler");
  cmd->add_option("--max-num-seqs", opts->job.max_num_seqs,
                  "Requests per step (only bounds the default --max-num-batched-tokens)")
      ->group("Scheduler");
  cmd->add_flag_callback(
         "--async-scheduling", [opts] { opts->job.async_scheduling = true; },
         "Two batches in flight (vLLM's default): windowed groups reserve for both")
      ->group("Scheduler");
  cmd->add_flag_callback(
         "--no-async-scheduling",
         [opts, cmd] {
           if (cmd->get_option("--async-scheduling")->count() > 0) {
             throw CLI::ValidationError("--no-async-scheduling",
                                        "conflicts with --async-scheduling");
           }
           opts->job.async_scheduling = false;
         },
         "One batch in flight")
      ->group("Scheduler");
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of the table");
  cmd->callback([opts] {
    const Plan plan = run::run_plan(opts->job);
    if (opts->json) {
      fmt::print("{}\n", run::plan_to_json(plan).dump(2));
    } else {
      print_human(plan, run::uses_default_gpu(opts->job.plan));
    }
    set_exit_code(0);
  });
}

}  // namespace kvsim::cli
