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
#include "plan_json.h"
#include "plan_options.h"

namespace kvsim::cli {
namespace {

struct PlanCommandOptions {
  PlanOptions card;
  std::optional<int64_t> concurrency;
  bool json = false;
};

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
  fmt::print("    = KV budget (K)            {:>10}   ({} B)\n", gib(p.kv_budget_gib),
             format_thousands(p.kv_budget_bytes));
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
  fmt::print("  vLLM block arithmetic (block_size {})\n", p.block_size);
  fmt::print("    page per layer             {} B\n", format_thousands(p.page_size_bytes));
  fmt::print("    bytes per block            {} B ({} layers)\n",
             format_thousands(p.bytes_per_block), p.num_layers);
  fmt::print("    num_gpu_blocks             {}{} (usable {}: block 0 is the null block)\n",
             format_thousands(p.num_gpu_blocks),
             p.num_gpu_blocks_overridden ? " (--num-gpu-blocks-override)" : "",
             format_thousands(p.usable_blocks));
  fmt::print("    blocks per request         {} = cdiv({}, {})\n",
             format_thousands(p.blocks_per_request), format_thousands(p.max_model_len),
             p.block_size);
  if (p.vllm_max_context_tokens) {
    fmt::print("    context for {} requests    {} tokens (whole blocks from the usable pool)\n",
               *p.concurrency, format_thousands(*p.vllm_max_context_tokens));
  }
  fmt::print("\n");
  fmt::print("{}\n", vllm_kv_cache_size_line(p));
  fmt::print("{}\n", vllm_max_concurrency_line(p));
  if (!p.notes.empty() || !p.warnings.empty()) fmt::print("\n");
  for (const std::string& n : p.notes) fmt::print("note: {}\n", n);
  for (const std::string& w : p.warnings) fmt::print("warning: {}\n", w);
}

}  // namespace

void register_plan_command(CLI::App& app) {
  auto opts = std::make_shared<PlanCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Capacity plan: KV budget, max concurrency and vLLM's num_gpu_blocks for a model");
  add_model_card_options(cmd, opts->card);
  cmd->add_option("--concurrency", opts->concurrency,
                  "Target concurrent sequences: also report the longest context each can hold")
      ->group("Pool");
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of the table");
  cmd->callback([opts] {
    PlanInputs in = resolve_plan_inputs(opts->card);
    in.concurrency = opts->concurrency;
    const Plan plan = compute_plan(in);
    if (opts->json) {
      fmt::print("{}\n", plan_to_json(plan).dump(2));
    } else {
      print_human(plan, uses_default_gpu(opts->card));
    }
    set_exit_code(0);
  });
}

}  // namespace kvsim::cli
