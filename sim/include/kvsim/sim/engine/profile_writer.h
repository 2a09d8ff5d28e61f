// Writing a `--step-time profile:DIR` directory from timings: the plain C++ half of the GPU
// profiler (cuda/profile/kvsim_gpu_profile.cu times the operators on a card; everything else,
// shapes, grids, statistics, CSV and README writing, lives here and is tested on CPU with fake
// timings, tests/sim/engine/test_profile_writer.cpp).
//
// What is timed, per tensor-parallel rank of a dense model (vLLM's column/row-parallel split):
//   GEMMs (bf16, out[tokens x n] = in[tokens x k] * W[k x n]):
//     attn_pre_proj  k = d,              n = (h/tp + 2 kv_r) d_h   (fused QKV)
//     attn_post_proj k = (h/tp) d_h,     n = d                     (O)
//     mlp_up_proj    k = d,              n = 2 I/tp                (fused gate and up, SwiGLU)
//     mlp_down_proj  k = I/tp,           n = d
//   memory-bound operators, timed as a kernel streaming the bytes the operator moves (bf16):
//     emb (read d, write d), input_layernorm and post_attention_layernorm (read 2d, write 2d:
//     vLLM's fused residual add + RMSNorm), attn_rope (read and write (h/tp + kv_r) d_h),
//     mlp_act (read 2 I/tp, write I/tp), add (read 2d, write d)
//   with d hidden, h query heads, kv_r = KV heads per rank (kv_heads_per_rank), d_h head width,
//   I intermediate size, all per token.
//   decode attention: the KV read of a decode step, batch sequences x context tokens through a
//   paged block table (one layer), whose fitted bandwidth becomes the profile's attn_mbu.
// The directory holds mlp.csv (Vidur's layout, exactly what read_operator_profile reads),
// attention.csv (kvsim's decode rows, not read by the step-time model; README.md says the
// attn_mbu fitted from them) and README.md (card, date, commit, command, "measured").
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvsim/core/model_presets.h"

namespace kvsim {

// Vidur's per-operator statistics (time_stats.<op>.{min,max,mean,median,std}), milliseconds.
// median: the middle sample (the mean of the middle two for an even count); std: the
// population standard deviation (numpy's default, as Vidur computes it).
struct TimingStats {
  double min = 0, max = 0, mean = 0, median = 0, std = 0;
  int32_t samples = 0;
};
// Throws std::invalid_argument when samples is empty or holds a non-finite or negative value.
TimingStats summarize_timings(std::span<const double> samples_ms);

// mlp.csv's operator columns in Vidur's order: emb, then kProfileLayerOps.
inline constexpr std::array<std::string_view, 10> kMlpCsvOps = {
    "emb",         "input_layernorm", "attn_pre_proj",
    "attn_rope",   "attn_post_proj",  "post_attention_layernorm",
    "mlp_up_proj", "mlp_act",         "mlp_down_proj",
    "add"};

// One operator of one layer on one rank (the table in the header comment).
struct LayerOpShape {
  enum class Kind { kGemm, kMemory };
  std::string_view op;  // a kMlpCsvOps name
  Kind kind = Kind::kGemm;
  int64_t n = 0, k = 0;               // kGemm: output and input features
  int64_t read_bytes_per_token = 0;   // kMemory
  int64_t write_bytes_per_token = 0;  // kMemory
};
// kMlpCsvOps' ten operators in that order. Throws std::invalid_argument (naming the model and
// the value) for MoE or MLA models (their MLP or attention is not these GEMMs), for tp < 1, or
// when tp does not divide the query heads or the intermediate size.
std::vector<LayerOpShape> layer_op_shapes(const ModelSpec& model, int32_t tp);

// The num_tokens Vidur profiled: 1, 2, 4, then 8 to 1024 in steps of 8, to 2048 in steps of 16,
// to 4096 in steps of 32, the step doubling with every further doubling, up to max_tokens
// (included). 259 points to 4096.
std::vector<int64_t> vidur_token_grid(int64_t max_tokens);
// A coarse grid for a short run: 1, 2, 3, 4, 6, 8, 12, ... (2^k and 3 * 2^k) up to max_tokens
// (included). 24 points to 4096. The reader interpolates linearly between them.
std::vector<int64_t> coarse_token_grid(int64_t max_tokens);

// One decode-attention measurement: `batch` sequences of `context` cached tokens each, one
// layer, kv_heads (per rank) x head_dim, bf16, pages of block_size tokens.
struct DecodeAttentionShape {
  int32_t tp = 1;
  int32_t batch = 0;
  int64_t context = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;
  // K and V bytes read: batch * context * kv_heads * head_dim * 2 * 2.
  int64_t kv_bytes() const noexcept;
};
// batch in {1, 4, 16, 64, 256} x context in {256, 1024, 4096, 16384}, with batch * context <=
// max_pool_tokens, for each tp.
std::vector<DecodeAttentionShape> decode_attention_grid(const ModelSpec& model,
                                                        std::span<const int32_t> tps,
                                                        int64_t max_pool_tokens = int64_t{1} << 20);

struct GpuProfilePlan {
  ModelSpec model;
  std::vector<int32_t> tps;
  std::vector<int64_t> tokens;
  std::vector<DecodeAttentionShape> attention;
  int32_t warmup = 3;        // untimed launches before each shape
  int32_t repetitions = 15;  // timed launches; the table keeps their statistics
};
// tps empty: every TP in {1, 2, 4, 8} that divides the query heads and the intermediate size.
// grid "vidur" or "coarse" (throws std::invalid_argument otherwise, and for layer_op_shapes'
// refusals).
GpuProfilePlan make_gpu_profile_plan(const ModelSpec& model, std::vector<int32_t> tps,
                                     std::string_view grid, int64_t max_tokens = 4096);

// Times operators; the GPU implements it with CUDA events, tests with arithmetic. Each call
// returns `repetitions` samples in milliseconds, one launch each, after `warmup` untimed ones.
class OperatorTimer {
 public:
  virtual ~OperatorTimer() = default;
  virtual std::vector<double> gemm(int64_t m, int64_t n, int64_t k, int32_t warmup,
                                   int32_t repetitions) = 0;
  virtual std::vector<double> memory(int64_t read_bytes, int64_t write_bytes, int32_t warmup,
                                     int32_t repetitions) = 0;
  virtual std::vector<double> decode_attention(const DecodeAttentionShape& shape, int32_t warmup,
                                               int32_t repetitions) = 0;
};

struct MlpRow {
  int32_t tp = 1;
  int64_t tokens = 0;
  std::array<TimingStats, kMlpCsvOps.size()> ops{};  // kMlpCsvOps order
};
struct AttentionRow {
  DecodeAttentionShape shape;
  TimingStats stats;
};
struct GpuProfileResult {
  ModelSpec model;
  std::vector<MlpRow> mlp;
  std::vector<AttentionRow> attention;
};
// Every (tp, tokens) of the plan, then every attention shape. `progress` (optional) gets a
// one-line note per TP and for the attention part.
GpuProfileResult run_gpu_profile(const GpuProfilePlan& plan, OperatorTimer& timer,
                                 const std::function<void(const std::string&)>& progress = {});

// Vidur's mlp.csv: time_stats.<op>.{min,max,mean,median,std} for kMlpCsvOps, then n_head,
// n_kv_head, n_embd, n_expanded_embd, vocab_size, use_gated_mlp, num_tokens,
// num_tensor_parallel_workers. Numbers in the shortest form that reads back exactly.
void write_mlp_csv(std::ostream& out, const GpuProfileResult& result);
// time_stats.attn_decode.{min,max,mean,median,std}, num_tensor_parallel_workers, batch_size,
// context_tokens, n_kv_head_per_rank, head_dim, block_size, kv_bytes.
void write_attention_csv(std::ostream& out, const GpuProfileResult& result);

// The HBM bandwidth fraction of decode attention: the least-squares slope s (ms per byte) of
// the median against kv_bytes over the rows (the intercept absorbs the launch cost), mbu =
// 1 / (s * 1e-3 * hbm_bytes_per_s), clamped to [0.001, 1] as the profile model requires.
// nullopt with fewer than two distinct kv_bytes, a slope <= 0 or hbm_bytes_per_s <= 0.
std::optional<double> fit_attention_mbu(std::span<const AttentionRow> rows, double hbm_bytes_per_s);

// What README.md records.
struct ProfileProvenance {
  std::string card;        // e.g. nvidia-smi's name
  std::string gpu_preset;  // the --gpu preset the numbers are for (attn_mbu is relative to it)
  double hbm_bytes_per_s = 0;
  std::string date;      // UTC, ISO 8601
  std::string commit;    // kvsim commit
  std::string command;   // the command line that wrote the directory
  bool measured = true;  // false: fake timings (tests); README says so in its first line
};

// Writes DIR/mlp.csv, DIR/attention.csv and DIR/README.md (creating DIR). Returns the
// `--step-time` spec to use ("profile:DIR[,attn_mbu=X]"). Throws std::runtime_error naming the
// file when one cannot be written.
std::string write_profile_dir(const std::string& dir, const GpuProfileResult& result,
                              const ProfileProvenance& provenance);

}  // namespace kvsim
