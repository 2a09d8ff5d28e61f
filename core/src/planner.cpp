// The capacity planner: the lesson's GiB-float arithmetic and vLLM 0.26's
// integer block math.
#include "kvsim/core/planner.h"

#include <cmath>
#include <limits>
#include <utility>

#include <fmt/core.h>

#include "kvsim/core/types.h"

namespace kvsim {
namespace {

// fp8_ds_mla (DeepSeek sparse MLA): 512 fp8 latent + 4 float32 scales + 64 bf16
// rope dims.
constexpr int64_t kFp8DsMlaBytesPerToken = 656;

// Bytes per parameter of 4-bit AWQ/GPTQ weights: 0.5 B for the nibble plus, per
// group of 128 weights, one fp16 scale and one 4-bit zero point (20 bits / 128
// weights).
constexpr double kInt4BytesPerParam = 0.5 + 20.0 / 128.0 / 8.0;

void require(bool ok, const std::string &message) {
  if (!ok)
    throw PlanError(message);
}

// a * b, or a PlanError naming the quantity when it leaves int64.
int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    throw PlanError(
        fmt::format("{} overflows 64-bit integers ({} x {})", what, a, b));
  }
  return out;
}

// A non-negative double of bytes as int64 (rounded), or a PlanError when it
// does not fit.
int64_t to_bytes(double bytes, std::string_view what) {
  require(std::isfinite(bytes) && bytes >= 0 && bytes < 9.2e18,
          fmt::format("{} ({} bytes) is out of the 64-bit range", what, bytes));
  return std::llround(bytes);
}

void require_in_range(int64_t v, int64_t max, std::string_view name,
                      std::string_view model) {
  require(v >= 1 && v <= max,
          fmt::format("model '{}': {} must be in [1, {}] (got {})", model, name,
                      max, v));
}

// The planner's bounds on the model shape (planner.h); the CLI and the config
// reader check the same bounds first with the flag or field name, this is the
// backstop for library callers.
void validate_model_bounds(const ModelSpec &m) {
  require_in_range(m.num_layers, kMaxNumLayers, "num_layers", m.name);
  require_in_range(m.num_kv_heads, kMaxHeads, "num_kv_heads", m.name);
  if (m.num_attention_heads != 0) {
    require_in_range(m.num_attention_heads, kMaxHeads, "num_attention_heads",
                     m.name);
  }
  require_in_range(m.head_dim, kMaxHeadDim, "head_dim", m.name);
  if (m.use_mla) {
    require_in_range(m.kv_lora_rank, kMaxHeadDim, "kv_lora_rank", m.name);
    require_in_range(m.qk_rope_head_dim, kMaxHeadDim, "qk_rope_head_dim",
                     m.name);
  }
  require(std::isfinite(m.num_parameters) && m.num_parameters <= kMaxNumParams,
          fmt::format("model '{}': num_parameters must be <= {:g} (got {:g})",
                      m.name, kMaxNumParams, m.num_parameters));
}

bool is_fp8_kv(std::string_view d) {
  return d == "fp8" || d == "fp8_e4m3" || d == "fp8_e5m2" || d == "fp8_ds_mla";
}

std::string resolve_kv_dtype(const PlanInputs &in) {
  const std::string &d = in.kv_cache_dtype;
  if (d == "auto")
    return in.model.dtype;
  if (d == "bfloat16" || d == "float16" || d == "float32" || d == "fp8" ||
      d == "fp8_e4m3" || d == "fp8_e5m2") {
    return d;
  }
  if (d == "fp8_ds_mla") {
    require(in.model.use_mla,
            fmt::format("--kv-cache-dtype fp8_ds_mla needs an MLA model ('{}' "
                        "is not one)",
                        in.model.name));
    return d;
  }
  throw PlanError(fmt::format("--kv-cache-dtype: unknown value '{}' (expected "
                              "auto, bfloat16, float16, float32, fp8, "
                              "fp8_e4m3, fp8_e5m2 or fp8_ds_mla)",
                              d));
}

std::string resolve_quantization(const PlanInputs &in) {
  const std::string q = in.quantization == "auto"
                            ? in.model.checkpoint_quantization
                            : in.quantization;
  require(q == "none" || q == "awq" || q == "gptq" || q == "fp8",
          fmt::format("--quantization: unknown value '{}' (expected auto, "
                      "none, awq, gptq or fp8)",
                      in.quantization));
  return q;
}

// Weights per GPU in bytes (double, as the lesson computes params * bytes) and
// bytes/param. Embedding and lm_head stay in the model dtype under awq/gptq/fp8
// (vLLM quantizes the linear layers only), so they are counted at full width
// when the shapes are known.
std::pair<double, double> weight_bytes(const ModelSpec &m,
                                       const std::string &quant, int64_t tp) {
  const double full = dtype_bytes(m.dtype);
  if (quant == "none")
    return {m.num_parameters * full / static_cast<double>(tp), full};
  const double per_param = quant == "fp8" ? 1.0 : kInt4BytesPerParam;
  double embed = static_cast<double>(m.vocab_size) *
                 static_cast<double>(m.hidden_size) *
                 (m.tie_word_embeddings ? 1.0 : 2.0);
  if (embed > m.num_parameters)
    embed = 0; // shapes unknown or inconsistent: quantize all
  const double bytes = embed * full + (m.num_parameters - embed) * per_param;
  return {bytes / static_cast<double>(tp), per_param};
}

// The single-group layout of a model whose layers all use full attention.
void fill_full_attention_kv_cache_config(Plan &p) {
  const bool fits = p.num_gpu_blocks <= std::numeric_limits<int32_t>::max();
  p.kv_cache_config = make_full_attention_kv_cache_config(
      fits ? static_cast<int32_t>(p.num_gpu_blocks) : 0,
      static_cast<int32_t>(p.block_size), static_cast<int32_t>(p.num_layers),
      p.page_size_bytes);
  // Replays refuse such a pool themselves (replay_setup), with the number; the
  // plan's printed output stays what it always was.
  if (!fits)
    p.kv_cache_config.kv_cache_tensors.clear();
}

std::string gib(double bytes) {
  return fmt::format("{:.2f} GiB", bytes / kGiB);
}

} // namespace

double dtype_bytes(std::string_view dtype) {
  if (dtype == "bfloat16" || dtype == "float16" || dtype == "half" ||
      dtype == "bf16")
    return 2;
  if (dtype == "float32" || dtype == "float")
    return 4;
  if (is_fp8_kv(dtype))
    return 1;
  throw PlanError(fmt::format(
      "unknown dtype '{}' (expected bfloat16, float16, float32 or fp8)",
      dtype));
}

int64_t kv_heads_per_rank(int64_t num_kv_heads, int64_t tp) {
  require(num_kv_heads > 0,
          fmt::format("num_kv_heads must be > 0 (got {})", num_kv_heads));
  require(tp > 0,
          fmt::format("--tensor-parallel-size must be > 0 (got {})", tp));
  if (num_kv_heads >= tp) {
    require(
        num_kv_heads % tp == 0,
        fmt::format(
            "num_kv_heads ({}) is not divisible by --tensor-parallel-size ({})",
            num_kv_heads, tp));
    return num_kv_heads / tp;
  }
  require(
      tp % num_kv_heads == 0,
      fmt::format(
          "--tensor-parallel-size ({}) is not a multiple of num_kv_heads ({})",
          tp, num_kv_heads));
  return 1; // each head replicated on tp / num_kv_heads ranks
}

int64_t page_size_bytes(const ModelSpec &m, int64_t heads,
                        std::string_view kv_dtype, int64_t block_size) {
  constexpr std::string_view kPage = "page size in bytes";
  if (m.use_mla) {
    if (kv_dtype == "fp8_ds_mla")
      return checked_mul(block_size, kFp8DsMlaBytesPerToken, kPage);
    const auto b = static_cast<int64_t>(dtype_bytes(kv_dtype));
    return checked_mul(
        checked_mul(block_size, m.kv_lora_rank + m.qk_rope_head_dim, kPage), b,
        kPage);
  }
  const auto b = static_cast<int64_t>(dtype_bytes(kv_dtype));
  return checked_mul(
      checked_mul(checked_mul(2 * block_size, heads, kPage), m.head_dim, kPage),
      b, kPage);
}

int64_t vllm_num_gpu_blocks(int64_t available, int64_t page, int64_t layers) {
  // Python's // floors toward -inf; with a negative budget the result is
  // clamped to 0 anyway.
  if (available <= 0)
    return 0;
  return available / page / layers;
}

double vllm_max_concurrency(int64_t n, int64_t max_model_len,
                            int64_t block_size) {
  return static_cast<double>(n) /
         static_cast<double>(cdiv(max_model_len, block_size));
}

int64_t vllm_kv_cache_tokens(int64_t n, int64_t max_model_len,
                             int64_t block_size) {
  const double c = static_cast<double>(n) /
                   static_cast<double>(cdiv(max_model_len, block_size));
  const double tokens = c * static_cast<double>(max_model_len);
  require(tokens < 9.2e18,
          fmt::format("KV cache size of {} tokens is out of the 64-bit range",
                      tokens));
  return static_cast<int64_t>(tokens);
}

std::string format_thousands(int64_t value) {
  const std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string vllm_kv_cache_size_line(const Plan &p) {
  return fmt::format("GPU KV cache size: {} tokens",
                     format_thousands(p.gpu_kv_cache_tokens));
}

std::string vllm_max_concurrency_line(const Plan &p) {
  return fmt::format("Maximum concurrency for {} tokens per request: {:.2f}x",
                     format_thousands(p.max_model_len), p.vllm_max_concurrency);
}

Plan compute_plan(const PlanInputs &in) {
  try {
    validate_model_spec(in.model);
  } catch (const std::invalid_argument &e) {
    throw PlanError(e.what());
  }
  validate_model_bounds(in.model);
  const ModelSpec &m = in.model;
  require(std::isfinite(in.gpu.vram_gib) && in.gpu.vram_gib > 0 &&
              in.gpu.vram_gib <= kMaxVramGib,
          fmt::format("--vram-gib must be in (0, {:g}] (got {:g})", kMaxVramGib,
                      in.gpu.vram_gib));
  require(in.gpu_memory_utilization > 0 && in.gpu_memory_utilization <= 1,
          fmt::format("--gpu-memory-utilization must be in (0, 1] (got {})",
                      in.gpu_memory_utilization));
  require(std::isfinite(in.overhead_gib) && in.overhead_gib >= 0 &&
              in.overhead_gib <= kMaxVramGib,
          fmt::format("--overhead-gib must be in [0, {:g}] (got {:g})",
                      kMaxVramGib, in.overhead_gib));
  require(!in.weights_gib ||
              (std::isfinite(*in.weights_gib) && *in.weights_gib >= 0 &&
               *in.weights_gib <= kMaxVramGib),
          fmt::format("--weights-gib must be in [0, {:g}] (got {:g})",
                      kMaxVramGib, in.weights_gib.value_or(0)));
  require(in.block_size > 0 && in.block_size <= kMaxBlockSize,
          fmt::format("--block-size must be in [1, {}] (got {})", kMaxBlockSize,
                      in.block_size));
  require(
      in.max_model_len >= 0,
      fmt::format("--max-model-len must be > 0 (got {})", in.max_model_len));
  require(!in.concurrency || *in.concurrency > 0,
          fmt::format("--concurrency must be > 0 (got {})",
                      in.concurrency.value_or(0)));
  require(!in.num_gpu_blocks_override || *in.num_gpu_blocks_override > 0,
          fmt::format("--num-gpu-blocks-override must be > 0 (got {})",
                      in.num_gpu_blocks_override.value_or(0)));
  require(in.tensor_parallel_size > 0 &&
              in.tensor_parallel_size <= kMaxTensorParallelSize,
          fmt::format("--tensor-parallel-size must be in [1, {}] (got {})",
                      kMaxTensorParallelSize, in.tensor_parallel_size));
  if (m.num_attention_heads > 0) {
    require(m.num_attention_heads % in.tensor_parallel_size == 0,
            fmt::format("num_attention_heads ({}) is not divisible by "
                        "--tensor-parallel-size ({})",
                        m.num_attention_heads, in.tensor_parallel_size));
  }

  Plan p;
  p.model_name = m.name;
  p.gpu_name = in.gpu.name;
  p.vram_gib = in.gpu.vram_gib;
  p.gpu_memory_utilization = in.gpu_memory_utilization;
  p.overhead_gib = in.overhead_gib;
  p.tensor_parallel_size = in.tensor_parallel_size;
  p.num_layers = m.num_layers;
  p.block_size = in.block_size;
  p.concurrency = in.concurrency;
  p.kv_cache_dtype = resolve_kv_dtype(in);
  p.quantization = resolve_quantization(in);
  p.max_model_len =
      in.max_model_len > 0 ? in.max_model_len : m.max_position_embeddings;
  require(p.max_model_len > 0,
          fmt::format(
              "model '{}' has no max_position_embeddings: pass --max-model-len",
              m.name));
  if (m.max_position_embeddings > 0 &&
      p.max_model_len > m.max_position_embeddings) {
    p.warnings.push_back(
        fmt::format("max_model_len {} exceeds the model's "
                    "max_position_embeddings {} (vLLM refuses this "
                    "unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)",
                    p.max_model_len, m.max_position_embeddings));
  }

  // KV shape per rank.
  if (m.use_mla) {
    p.num_kv_heads_per_rank = 1;
    p.head_dim = m.kv_lora_rank + m.qk_rope_head_dim;
    p.notes.push_back(fmt::format(
        "MLA: one latent of kv_lora_rank + qk_rope_head_dim = {} values per "
        "token and layer (no "
        "separate K and V), replicated on every tensor-parallel rank",
        p.head_dim));
  } else {
    p.num_kv_heads_per_rank =
        kv_heads_per_rank(m.num_kv_heads, in.tensor_parallel_size);
    p.head_dim = m.head_dim;
    if (m.num_kv_heads < in.tensor_parallel_size) {
      p.notes.push_back(fmt::format(
          "{} KV heads < TP {}: each rank holds one replicated head",
          m.num_kv_heads, in.tensor_parallel_size));
    }
  }
  if (m.sliding_window > 0) {
    p.notes.push_back(
        fmt::format("sliding window {} tokens{}{}: treated as full attention "
                    "here (vLLM gives such layers "
                    "their own KV-cache group, which changes num_gpu_blocks)",
                    m.sliding_window, m.sliding_window_note.empty() ? "" : ", ",
                    m.sliding_window_note));
  }
  if (m.num_parameters_estimated && !in.weights_gib) {
    p.notes.push_back(fmt::format(
        "parameter count {:.3f}e9 estimated from the config's shapes",
        m.num_parameters / 1e9));
  }

  // Weights.
  if (in.weights_gib) {
    p.weights_from_flag = true;
    p.weights_gib = *in.weights_gib;
    p.weights_bytes = to_bytes(*in.weights_gib * kGiB, "--weights-gib");
  } else {
    require(
        m.num_parameters > 0,
        fmt::format(
            "weights of model '{}' unknown: pass --weights-gib or --num-params",
            m.name));
    const auto [bytes, per_param] =
        weight_bytes(m, p.quantization, in.tensor_parallel_size);
    p.weight_bytes_per_param = per_param;
    p.weights_gib = bytes / kGiB;
    p.weights_bytes = to_bytes(bytes, "the weights");
  }

  // The lesson's arithmetic, operation for operation (Card.kv_budget_gib,
  // max_concurrency, max_context in vram_planner.py).
  p.usable_gib = in.gpu_memory_utilization * in.gpu.vram_gib;
  p.kv_budget_gib = p.usable_gib - p.weights_gib - in.overhead_gib;
  const int64_t page = page_size_bytes(m, p.num_kv_heads_per_rank,
                                       p.kv_cache_dtype, in.block_size);
  p.page_size_bytes = page;
  p.bytes_per_block = checked_mul(page, m.num_layers, "bytes per block");
  // Bytes per token over all layers: page / block_size is exact (page is
  // block_size * ...).
  p.kappa_bytes =
      checked_mul(page / in.block_size, m.num_layers, "KV bytes per token");
  p.kv_per_seq_bytes =
      checked_mul(p.kappa_bytes, p.max_model_len,
                  "KV bytes per sequence (kappa x max_model_len)");
  if (p.kv_budget_gib > 0) {
    const double per_seq_gib = static_cast<double>(p.kv_per_seq_bytes) / kGiB;
    // Both quotients are below budget bytes (<= 1e6 GiB) / 1 byte: no int64
    // overflow.
    p.max_concurrency = static_cast<int64_t>(p.kv_budget_gib / per_seq_gib);
    if (in.concurrency) {
      p.max_context_tokens =
          static_cast<int64_t>(p.kv_budget_gib * kGiB /
                               (static_cast<double>(p.kappa_bytes) *
                                static_cast<double>(*in.concurrency)));
    }
  } else if (in.concurrency) {
    p.max_context_tokens = 0;
  }

  // vLLM: requested = ceil(total * util); available = requested - non-KV
  // memory.
  const double total_bytes = in.gpu.vram_gib * kGiB;
  const int64_t requested =
      to_bytes(std::ceil(total_bytes * in.gpu_memory_utilization),
               "--vram-gib x utilization");
  const int64_t overhead_bytes =
      to_bytes(in.overhead_gib * kGiB, "--overhead-gib");
  p.kv_budget_bytes = requested - p.weights_bytes - overhead_bytes;

  if (!in.num_gpu_blocks_override &&
      (p.kv_budget_gib <= 0 || p.kv_budget_bytes <= 0)) {
    throw DoesNotFitError(fmt::format(
        "model '{}' does not fit on '{}': KV budget = {} x {} GiB - {:.2f} GiB "
        "weights - {:.2f} "
        "GiB overhead = {:.2f} GiB (<= 0)",
        m.name, in.gpu.name, in.gpu_memory_utilization, in.gpu.vram_gib,
        p.weights_gib, in.overhead_gib, p.kv_budget_gib));
  }
  if (p.kv_budget_gib <= 0) {
    p.warnings.push_back(
        fmt::format("the KV budget from the card is {:.2f} GiB (<= 0); the "
                    "pool size comes only from "
                    "--num-gpu-blocks-override",
                    p.kv_budget_gib));
  }

  // vLLM's block arithmetic (get_kv_cache_configs).
  int64_t available = p.kv_budget_bytes;
  p.num_gpu_blocks = vllm_num_gpu_blocks(available, page, m.num_layers);
  if (in.num_gpu_blocks_override) {
    p.num_gpu_blocks = *in.num_gpu_blocks_override;
    p.num_gpu_blocks_overridden = true;
    available = checked_mul(*in.num_gpu_blocks_override, p.bytes_per_block,
                            "--num-gpu-blocks-override x bytes per block");
  }
  p.blocks_per_request = cdiv(p.max_model_len, in.block_size);
  const int64_t needed = checked_mul(p.bytes_per_block, p.blocks_per_request,
                                     "KV bytes of one max_model_len request");
  if (needed > available) {
    throw DoesNotFitError(fmt::format(
        "model '{}' does not fit on '{}': one request of max_model_len {} "
        "needs {} of KV cache "
        "({} blocks of {} tokens), the available KV cache memory is {} ({} "
        "blocks); the longest "
        "max_model_len that fits is {}",
        m.name, in.gpu.name, p.max_model_len, gib(static_cast<double>(needed)),
        p.blocks_per_request, in.block_size,
        gib(static_cast<double>(available)), p.num_gpu_blocks,
        checked_mul(p.num_gpu_blocks, in.block_size,
                    "tokens of the KV cache")));
  }
  p.vllm_max_concurrency =
      vllm_max_concurrency(p.num_gpu_blocks, p.max_model_len, in.block_size);
  p.gpu_kv_cache_tokens =
      vllm_kv_cache_tokens(p.num_gpu_blocks, p.max_model_len, in.block_size);
  p.usable_blocks = p.num_gpu_blocks - 1;
  if (in.concurrency) {
    p.vllm_max_context_tokens =
        p.usable_blocks / *in.concurrency * in.block_size;
  }
  if (p.blocks_per_request == p.num_gpu_blocks) {
    p.full_length_request_unservable = true;
    p.warnings.push_back(
        fmt::format("a request of max_model_len {} needs {} blocks = "
                    "num_gpu_blocks, but only {} are usable "
                    "(block 0 is the null block): vLLM starts, yet such a "
                    "request is never admitted",
                    p.max_model_len, p.blocks_per_request, p.usable_blocks));
  }
  fill_full_attention_kv_cache_config(p);
  return p;
}

} // namespace kvsim
