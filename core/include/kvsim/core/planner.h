// The capacity planner: how many sequences fit in one GPU's KV cache, two ways.
//
// 1. The lesson's arithmetic ("KV Cache Memory Math", docs/planner.md), computed exactly as its
//    Python does, in GiB floats:
//      kappa      = 2 * layers * kv_heads * head_dim * kv_dtype_bytes      (bytes per token)
//      budget_gib = util * vram_gib - weights_gib - overhead_gib
//      N_seq      = int(budget_gib / (kappa * S / GiB))
//      S_max      = int(budget_gib * GiB / (kappa * N))
// 2. vLLM's block arithmetic (spec sections 6.2-6.3; 0.26 and 0.33 agree on the numbers, and
//    differ in the start-up report, the fit check and a batch default: PlanInputs::vllm_version,
//    VllmBehavior), in integer bytes:
//      available  = ceil(vram_bytes * util) - weights_bytes - overhead_bytes
//      page       = 2 * block_size * kv_heads * head_dim * dtype_bytes   (per layer; MLA: no 2)
//      N          = max(available // page // layers, 0)   (or --num-gpu-blocks-override)
//      max_conc   = N / cdiv(L, block_size)               (double, counts the null block)
//      tokens     = int(N / cdiv(L, block_size) * L)
// Everything here is pure arithmetic: no I/O. Bad inputs throw PlanError; a model that does not
// fit throws DoesNotFitError. Both messages are one line with the numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvsim/core/kv_cache_spec.h"
#include "kvsim/core/model_presets.h"
#include "kvsim/core/types.h"
#include "kvsim/core/vllm_version.h"

namespace kvsim {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Input bounds, far beyond any real model or card (the largest models have ~130 layers, 128 KV
// heads of <= 576 dims, 2e12 parameters; the largest cards ~200 GiB). compute_plan rejects values
// outside them with a PlanError naming the field, and still does its int64 byte arithmetic with
// overflow checks (a huge max_model_len x a huge model can exceed int64 within the bounds).
inline constexpr int64_t kMaxNumLayers = 1024;
inline constexpr int64_t kMaxHeads = 65536;    // num_kv_heads, num_attention_heads
inline constexpr int64_t kMaxHeadDim = 65536;  // head_dim, kv_lora_rank, qk_rope_head_dim
inline constexpr double kMaxVramGib = 1e6;     // also bounds --overhead-gib and --weights-gib
inline constexpr double kMaxNumParams = 1e15;
inline constexpr int32_t kMaxBlockSize = int32_t{1} << 20;
inline constexpr int64_t kMaxTensorParallelSize = 65536;
inline constexpr int64_t kMaxBatchTokens = int64_t{1} << 40;  // --max-num-batched-tokens/-seqs

// Invalid input (a size out of range, an unknown dtype, a TP size that does not divide heads).
class PlanError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The configuration is valid but the KV cache cannot hold one max_model_len request (or the
// budget is not positive). vLLM refuses to start in the same cases. what() is kvsim's one line
// with the numbers; vllm_error() is the ValueError text the plan's vLLM release raises, byte for
// byte (kv_cache_utils.py _check_enough_kv_cache_memory: "No available memory for the cache
// blocks. ..." or "To serve at least one request with the model's max seq len ...").
class DoesNotFitError : public std::runtime_error {
 public:
  explicit DoesNotFitError(const std::string& message, std::string vllm_error = {})
      : std::runtime_error(message), vllm_error_(std::move(vllm_error)) {}
  const std::string& vllm_error() const { return vllm_error_; }

 private:
  std::string vllm_error_;
};

// What the planner is asked. Optional fields fall back to the model/card (documented per field).
struct PlanInputs {
  ModelSpec model;
  GpuSpec gpu;
  double gpu_memory_utilization = 0.92;  // vLLM's default; must be in (0, 1]
  double overhead_gib = 1.6;             // CUDA context + activations + framework; >= 0
  std::optional<double> weights_gib;     // overrides params x bytes/param when set; >= 0
  std::string quantization = "auto";     // auto (the checkpoint's) | none | awq | gptq | fp8
  std::string kv_cache_dtype = "auto";   // auto (= model dtype) | bfloat16 | float16 | fp8 |
                                         // fp8_e4m3 | fp8_e5m2 | float32 | fp8_ds_mla (MLA)
  int64_t tensor_parallel_size = 1;      // the plan is per GPU (per TP rank)
  int64_t max_model_len = 0;             // 0 = model.max_position_embeddings
  std::optional<int64_t> concurrency;    // the inverse question: S_max for N streams
  int32_t block_size = kDefaultBlockSize;
  std::optional<int64_t> num_gpu_blocks_override;
  // vLLM --kv-cache-memory-bytes: the KV budget in bytes, replacing util x card - weights -
  // overhead (vLLM then ignores gpu_memory_utilization for the cache size).
  std::optional<int64_t> kv_cache_memory_bytes;
  // Scheduler knobs that size the sliding-window and chunked-local groups (vLLM reserves for
  // every token scheduled but not yet processed: max_in_flight_tokens = batches in flight x
  // max_num_batched_tokens). nullopt max_num_batched_tokens: vLLM's `vllm serve` default for the
  // card (vllm_default_max_num_batched_tokens, which reads max_num_seqs).
  std::optional<int64_t> max_num_batched_tokens;
  std::optional<int64_t> max_num_seqs;
  bool async_scheduling = true;  // vLLM's default (0.26 and 0.33): two batches in flight
  // vLLM --disable-hybrid-kv-cache-manager; nullopt = vLLM's rule (disabled for models with
  // chunked local attention, enabled otherwise). Disabled: every layer is sized as full attention.
  std::optional<bool> disable_hybrid_kv_cache_manager;
  // The vLLM release whose start-up arithmetic, report and defaults the plan follows.
  VllmVersion vllm_version = kDefaultVllmVersion;
};

// One KV cache group of the plan (vLLM KVCacheGroupSpec plus what sizing derived from it).
struct PlanKVCacheGroup {
  KVCacheSpecKind kind = KVCacheSpecKind::kFullAttention;
  int64_t window_tokens = 0;       // sliding_window or attention_chunk_size; 0 for full
  int64_t num_layers = 0;          // real layers in the group
  int64_t num_padding_layers = 0;  // group_size - num_layers (empty slots of the last group)
  // Tokens one request may hold in this group: max_model_len for full attention; for a window
  // min(W - 1 + max_in_flight_tokens, L), for a chunk min(C + max_in_flight_tokens, L).
  int64_t tokens_per_request = 0;
  // vLLM max_admission_blocks_per_request (windowed) or cdiv(L, bs) (full): the blocks one
  // request may hold in this group, and what start-up sizing reserves for it.
  int64_t blocks_per_request = 0;
  int64_t max_memory_usage_bytes = 0;  // one layer: blocks_per_request x page
};

// The answer. Byte counts are per GPU.
struct Plan {
  // Resolved inputs.
  VllmVersion vllm_version = kDefaultVllmVersion;
  std::string model_name;
  std::string gpu_name;
  double vram_gib = 0;
  double gpu_memory_utilization = 0;
  double overhead_gib = 0;
  std::string quantization;           // resolved (never "auto")
  std::string kv_cache_dtype;         // resolved (never "auto")
  double weight_bytes_per_param = 0;  // 0 when --weights-gib was given
  bool weights_from_flag = false;
  int64_t tensor_parallel_size = 1;
  int64_t num_layers = 0;
  int64_t num_kv_heads_per_rank = 0;  // MLA: 1 (the latent is replicated on every rank)
  int64_t head_dim = 0;               // MLA: kv_lora_rank + qk_rope_head_dim
  int64_t max_model_len = 0;
  int32_t block_size = 0;
  std::optional<int64_t> concurrency;
  int64_t max_num_batched_tokens = 0;
  bool async_scheduling = true;
  int64_t max_in_flight_tokens = 0;        // (2 if async else 1) x max_num_batched_tokens
  bool kv_cache_memory_from_flag = false;  // --kv-cache-memory-bytes gave the budget

  // Memory stack (GiB floats exactly as the lesson computes them).
  double usable_gib = 0;   // util * vram_gib
  double weights_gib = 0;  // W
  int64_t weights_bytes = 0;

  // The lesson.
  int64_t kappa_bytes = 0;       // KV bytes per token, all layers
  double kv_budget_gib = 0;      // util*V - W - O
  int64_t kv_budget_bytes = 0;   // vLLM's integer "available" KV bytes (ceil(V*u) - W - O)
  int64_t kv_per_seq_bytes = 0;  // kappa * max_model_len
  int64_t max_concurrency = 0;   // N_seq
  std::optional<int64_t> max_context_tokens;  // S_max (when concurrency is set)

  // The lesson in hybrid form (hybrid models with the hybrid manager on): kappa splits into the
  // full-attention layers' part, which grows with S, and the windowed layers' part, which vLLM
  // caps at each group's tokens_per_request:
  //   KV/seq = kappa_full * S + kappa_windowed * min(cap, S)
  int64_t kappa_full_bytes = 0;      // KV bytes per token of the full-attention layers
  int64_t kappa_windowed_bytes = 0;  // KV bytes per token of the sliding/chunked layers
  int64_t windowed_tokens_cap = 0;   // tokens a windowed layer keeps per request (vLLM's cap)
  int64_t hybrid_kv_per_seq_bytes = 0;
  int64_t hybrid_max_concurrency = 0;                // floor(K / KV/seq), GiB floats
  std::optional<int64_t> hybrid_max_context_tokens;  // S for `concurrency` streams

  // Hybrid layout. hybrid_model: some layers use a sliding window or chunked local attention.
  // hybrid_kv_cache_manager: vLLM gives them their own groups (false: they are sized as full
  // attention); hybrid_manager_reason says which rule decided.
  bool hybrid_model = false;
  bool hybrid_kv_cache_manager = false;
  std::string hybrid_manager_reason;
  std::vector<PlanKVCacheGroup> kv_cache_groups;  // in vLLM's group order
  int64_t kv_cache_group_size = 0;  // layers per group = tensors in the pool (vLLM group_size)

  // vLLM's block arithmetic.
  int64_t page_size_bytes = 0;  // per layer, per block
  int64_t bytes_per_block = 0;  // page * layers (hybrid: page * group_size)
  int64_t num_gpu_blocks = 0;   // N, null block included
  bool num_gpu_blocks_overridden = false;
  // Blocks one max_model_len request reserves: cdiv(max_model_len, block_size); hybrid: the sum
  // of every group's blocks_per_request (vLLM's num_block_per_request).
  int64_t blocks_per_request = 0;
  double vllm_max_concurrency = 0;
  int64_t gpu_kv_cache_tokens = 0;
  // Blocks a request may really hold: N - 1 (the null block is never handed out).
  int64_t usable_blocks = 0;
  // Longest context each of `concurrency` streams can hold in the usable blocks
  // (floor((N-1)/concurrency) * block_size; hybrid: the largest S whose blocks over all groups
  // fit, which is unbounded (-1) when no group grows with S); set with concurrency.
  std::optional<int64_t> vllm_max_context_tokens;
  // cdiv(L, bs) == N under vLLM 0.26: it starts, but a request of length L never passes the
  // full-sequence admission gate (only N - 1 blocks are usable). vLLM 0.33 holds the null block
  // back in its start-up check, so there the case is a DoesNotFitError and this stays false.
  bool full_length_request_unservable = false;

  // The KV cache layout vLLM builds from this plan (get_kv_cache_configs): groups, tensors and
  // num_blocks (== num_gpu_blocks). The allocator and every replay are built from it. Non-hybrid
  // models: one full-attention group holding every layer. When num_gpu_blocks exceeds the
  // allocator's int32 block ids the groups are filled but num_blocks is 0 and the tensors are
  // empty (replays refuse such a pool).
  KVCacheConfig kv_cache_config;

  std::vector<std::string> notes;     // modelling caveats (sliding window, estimates, MLA)
  std::vector<std::string> warnings;  // things that will bite (the off-by-one above, ...)
};

// Bytes of one element of a torch dtype name ("bfloat16", "float16", "float32", "fp8", ...).
// Throws PlanError for an unknown name.
double dtype_bytes(std::string_view dtype);

// KV heads held by one tensor-parallel rank: n_kv / tp, or 1 (replicated) when n_kv < tp.
// Throws PlanError when neither divides the other (vLLM refuses those too).
int64_t kv_heads_per_rank(int64_t num_kv_heads, int64_t tensor_parallel_size);

// Per-layer page of one block (vLLM AttentionSpec.page_size_bytes).
//   MHA/GQA: 2 * block_size * kv_heads * head_dim * dtype_bytes
//   MLA:     block_size * (kv_lora_rank + qk_rope_head_dim) * dtype_bytes (fp8_ds_mla: 656 B/token)
int64_t page_size_bytes(const ModelSpec& model, int64_t kv_heads_per_rank,
                        std::string_view kv_cache_dtype, int32_t block_size);

// vLLM's `vllm serve` default for --max-num-batched-tokens (EngineArgs.get_batch_defaults,
// OPENAI_API_SERVER): 8192 on cards of >= 70 GiB that are not A100s, else 2048; vLLM 0.33 first
// gives cards of >= 160 GiB 16384 (VllmBehavior::large_card_batched_tokens); then
// min(max_num_seqs x max_model_len, that) with max_num_seqs defaulting to 1024 (the two large
// tiers) / 256.
int64_t vllm_default_max_num_batched_tokens(const GpuSpec& gpu, int64_t max_model_len,
                                            std::optional<int64_t> max_num_seqs,
                                            VllmVersion vllm_version);

// vLLM SlidingWindowSpec / ChunkedLocalAttentionSpec.max_admission_blocks_per_request, and
// cdiv(L, bs) for full attention: the blocks one request may hold in a group of this spec.
//   sliding window: cdiv(min(W - 1 + max_in_flight_tokens, L), bs) + 1
//   chunked local:  cdiv(min(C + max_in_flight_tokens, L), bs)
int64_t group_blocks_per_request(const KVCacheSpec& spec, int64_t max_in_flight_tokens,
                                 int64_t max_model_len);

// vLLM get_num_blocks: max(available // page // layers, 0).
int64_t vllm_num_gpu_blocks(int64_t available_bytes, int64_t page_size_bytes, int64_t num_layers);
// vLLM: N / cdiv(L, bs), a double.
double vllm_max_concurrency(int64_t num_gpu_blocks, int64_t max_model_len, int32_t block_size);
// vLLM: int(N / cdiv(L, bs) * L), operations in that order.
int64_t vllm_kv_cache_tokens(int64_t num_gpu_blocks, int64_t max_model_len, int32_t block_size);
// The lesson's formula over a pool: floor(N * block_size / L) (N counts the null block, as
// vLLM's capacity logs do); 0 for L <= 0.
int64_t pool_formula_concurrency(int64_t num_gpu_blocks, int32_t block_size, int64_t max_model_len);

// "491,520": Python's "{:,}".
std::string format_thousands(int64_t value);
// vLLM's start-up capacity report for plan.vllm_version, byte for byte, one string a line:
//   0.26: "GPU KV cache size: N tokens"
//         "Maximum concurrency for L tokens per request: X.XXx"
//   0.33: "GPU KV cache size: N tokens, Maximum concurrency for L tokens per request: X.XXx"
std::vector<std::string> vllm_kv_cache_report_lines(const Plan& plan);
// vLLM's format_gib (utils/mem_utils.py): f"{round(bytes / 2**30, 2)}", Python's float repr of
// the rounded value ("16.0", "0.5", "131.42").
std::string vllm_format_gib(int64_t bytes);

// Computes the whole plan. Throws PlanError on invalid input, DoesNotFitError when vLLM would
// refuse to start: budget <= 0, or one max_model_len request needs more than the pool; under
// vLLM 0.33 the check holds the null block back (budget <= one block, or a request needing
// every block, is refused; VllmBehavior::fit_check_holds_null_block).
Plan compute_plan(const PlanInputs& in);

}  // namespace kvsim
