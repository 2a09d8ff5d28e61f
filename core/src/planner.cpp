// The capacity planner: the lesson's GiB-float arithmetic and vLLM's integer block math (0.26 and
// 0.33: VllmBehavior says where they differ).
#include "kvsim/core/planner.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <limits>
#include <utility>

#include <fmt/core.h>

#include "kvsim/core/param.h"
#include "kvsim/core/types.h"

namespace kvsim {
namespace {

// vLLM 0.33 get_batch_defaults: the card memory (GiB) from which the large tier applies.
constexpr double kLargeCardGib = 160;

// vLLM's ValueError when no block is left for the cache (text identical in 0.26 and 0.33).
constexpr const char* kVllmNoAvailableMemory =
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
    "initializing the engine (this flag also controls CPU memory reservation on the CPU backend, "
    "despite its name). See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for "
    "more details.";

// fp8_ds_mla (DeepSeek sparse MLA): 512 fp8 latent + 4 float32 scales + 64 bf16 rope dims.
constexpr int64_t kFp8DsMlaBytesPerToken = 656;

// Bytes per parameter of 4-bit AWQ/GPTQ weights: 0.5 B for the nibble plus, per group of 128
// weights, one fp16 scale and one 4-bit zero point (20 bits / 128 weights).
constexpr double kInt4BytesPerParam = 0.5 + 20.0 / 128.0 / 8.0;

// Bytes per parameter of MXFP4 weights (gpt-oss experts): a 4-bit E2M1 value plus one 8-bit
// E8M0 scale per 32 values.
constexpr double kMxfp4BytesPerParam = 0.5 + 1.0 / 32.0;

void require(bool ok, const std::string& message) {
  if (!ok) throw PlanError(message);
}

// a * b, or a PlanError naming the quantity when it leaves int64.
int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    throw PlanError(fmt::format("{} overflows 64-bit integers ({} x {})", what, a, b));
  }
  return out;
}

// A non-negative double of bytes as int64 (rounded), or a PlanError when it does not fit.
int64_t to_bytes(double bytes, std::string_view what) {
  require(std::isfinite(bytes) && bytes >= 0 && bytes < 9.2e18,
          fmt::format("{} ({} bytes) is out of the 64-bit range", what, bytes));
  return std::llround(bytes);
}

void require_in_range(int64_t v, int64_t max, std::string_view name, std::string_view model) {
  require(v >= 1 && v <= max,
          fmt::format("model '{}': {} must be in [1, {}] (got {})", model, name, max, v));
}

// The planner's bounds on the model shape (planner.h); the CLI and the config reader check the
// same bounds first with the flag or field name, this is the backstop for library callers.
void validate_model_bounds(const ModelSpec& m) {
  require_in_range(m.num_layers, kMaxNumLayers, "num_layers", m.name);
  require_in_range(m.num_kv_heads, kMaxHeads, "num_kv_heads", m.name);
  if (m.num_attention_heads != 0) {
    require_in_range(m.num_attention_heads, kMaxHeads, "num_attention_heads", m.name);
  }
  require_in_range(m.head_dim, kMaxHeadDim, "head_dim", m.name);
  if (m.use_mla) {
    require_in_range(m.kv_lora_rank, kMaxHeadDim, "kv_lora_rank", m.name);
    require_in_range(m.qk_rope_head_dim, kMaxHeadDim, "qk_rope_head_dim", m.name);
  }
  require(std::isfinite(m.num_parameters) && m.num_parameters <= kMaxNumParams,
          fmt::format("model '{}': num_parameters must be <= {:g} (got {:g})", m.name,
                      kMaxNumParams, m.num_parameters));
}

bool is_fp8_kv(std::string_view d) {
  return d == "fp8" || d == "fp8_e4m3" || d == "fp8_e5m2" || d == "fp8_ds_mla";
}

std::string resolve_kv_dtype(const PlanInputs& in) {
  const std::string& d = in.kv_cache_dtype;
  if (d == "auto") return in.model.dtype;
  if (d == "bfloat16" || d == "float16" || d == "float32" || d == "fp8" || d == "fp8_e4m3" ||
      d == "fp8_e5m2") {
    return d;
  }
  if (d == "fp8_ds_mla") {
    require(in.model.use_mla, fmt::format("{} needs an MLA model ('{}' is not one)",
                                          param("kv_cache_dtype", "fp8_ds_mla"), in.model.name));
    return d;
  }
  throw PlanError(fmt::format(
      "{}: unknown value '{}' (expected auto, bfloat16, float16, float32, fp8, fp8_e4m3, "
      "fp8_e5m2 or fp8_ds_mla)",
      param("kv_cache_dtype"), d));
}

std::string resolve_quantization(const PlanInputs& in) {
  const std::string q =
      in.quantization == "auto" ? in.model.checkpoint_quantization : in.quantization;
  require(q == "none" || q == "awq" || q == "gptq" || q == "fp8" || q == "mxfp4",
          fmt::format("{}: unknown value '{}' (expected auto, none, awq, gptq, fp8 or mxfp4)",
                      param("quantization"), in.quantization));
  return q;
}

// Weights per GPU in bytes (double, as the lesson computes params * bytes) and bytes/param.
// Embedding and lm_head stay in the model dtype under awq/gptq/fp8 (vLLM quantizes the linear
// layers only), so they are counted at full width when the shapes are known.
std::pair<double, double> weight_bytes(const ModelSpec& m, const std::string& quant, int64_t tp) {
  const double full = dtype_bytes(m.dtype);
  if (quant == "none") return {m.num_parameters * full / static_cast<double>(tp), full};
  const double per_param = quant == "fp8"     ? 1.0
                           : quant == "mxfp4" ? kMxfp4BytesPerParam
                                              : kInt4BytesPerParam;
  double embed = static_cast<double>(m.vocab_size) * static_cast<double>(m.hidden_size) *
                 (m.tie_word_embeddings ? 1.0 : 2.0);
  if (embed > m.num_parameters) embed = 0;  // shapes unknown or inconsistent: quantize all
  const double bytes = embed * full + (m.num_parameters - embed) * per_param;
  return {bytes / static_cast<double>(tp), per_param};
}

// vLLM's sliding-window layers take the attention backend's smallest kernel block (16 tokens for
// FlashAttention and Triton, attention.py _largest_kernel_block_within) and
// unify_kv_cache_spec_page_size scales it up to the full layers' page.
constexpr int64_t kSlidingWindowKernelBlock = 16;

KVCacheSpec layer_spec(const ModelSpec& m, KVCacheSpecKind kind, int32_t block_size, int64_t page) {
  KVCacheSpec s;
  s.kind = kind;
  s.block_size = block_size;
  s.page_size_bytes = page;
  if (kind == KVCacheSpecKind::kSlidingWindow)
    s.sliding_window = static_cast<int32_t>(m.sliding_window);
  if (kind == KVCacheSpecKind::kChunkedLocalAttention) {
    s.attention_chunk_size = static_cast<int32_t>(m.attention_chunk_size);
  }
  return s;
}

// Tokens one request keeps in a group of this spec (the min(...) of
// max_admission_blocks_per_request; no cap by max_model_len when `max_model_len` is 0).
int64_t tokens_per_request(const KVCacheSpec& spec, int64_t in_flight, int64_t max_model_len) {
  int64_t tokens = max_model_len;
  if (spec.kind == KVCacheSpecKind::kSlidingWindow) {
    tokens = spec.sliding_window - 1 + in_flight;
  } else if (spec.kind == KVCacheSpecKind::kChunkedLocalAttention) {
    tokens = spec.attention_chunk_size + in_flight;
  }
  return max_model_len > 0 ? std::min(tokens, max_model_len) : tokens;
}

// vLLM _get_kv_cache_groups_uniform_page_size: layers with identical specs are batched in the
// order their spec first appears; every group holds group_size layer slots (the smallest
// type's layer count, or the largest when that is under 1.5x the smallest); a type of n layers
// becomes cdiv(n, group_size) groups, group i taking layers[i::num_groups] (the last slots of
// short groups are padding).
std::vector<KVCacheGroupSpec> group_layers(const ModelSpec& m, int32_t block_size, int64_t page,
                                           int64_t& group_size) {
  std::vector<std::pair<KVCacheSpec, std::vector<int32_t>>> types;
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    const KVCacheSpec spec = layer_spec(m, layer_type(m, layer), block_size, page);
    auto it =
        std::find_if(types.begin(), types.end(), [&](const auto& t) { return t.first == spec; });
    if (it == types.end()) {
      types.push_back({spec, {}});
      it = std::prev(types.end());
    }
    it->second.push_back(static_cast<int32_t>(layer));
  }
  int64_t min_layers = m.num_layers;
  int64_t max_layers = 0;
  for (const auto& t : types) {
    min_layers = std::min<int64_t>(min_layers, static_cast<int64_t>(t.second.size()));
    max_layers = std::max<int64_t>(max_layers, static_cast<int64_t>(t.second.size()));
  }
  group_size = 2 * max_layers < 3 * min_layers ? max_layers : min_layers;
  std::vector<KVCacheGroupSpec> groups;
  for (const auto& [spec, layers] : types) {
    const int64_t n = static_cast<int64_t>(layers.size());
    const int64_t num_groups = cdiv(n, group_size);
    for (int64_t i = 0; i < num_groups; ++i) {
      KVCacheGroupSpec g;
      g.kv_cache_spec = spec;
      for (int64_t j = i; j < n; j += num_groups) g.layer_indices.push_back(layers[j]);
      groups.push_back(std::move(g));
    }
  }
  return groups;
}

// vLLM get_kv_cache_config_from_groups, general case: group_size tensors, tensor i shared by the
// i-th layer of every group that has one, each page x num_blocks bytes.
std::vector<KVCacheTensor> shared_tensors(const std::vector<KVCacheGroupSpec>& groups,
                                          int64_t group_size, int64_t page, int64_t num_blocks) {
  std::vector<KVCacheTensor> tensors;
  for (int64_t i = 0; i < group_size; ++i) {
    KVCacheTensor t;
    t.size_bytes = checked_mul(page, num_blocks, "KV cache tensor size");
    for (const KVCacheGroupSpec& g : groups) {
      if (i < static_cast<int64_t>(g.layer_indices.size())) {
        t.shared_by.push_back(g.layer_indices[static_cast<size_t>(i)]);
      }
    }
    tensors.push_back(std::move(t));
  }
  return tensors;
}

// The largest context S such that `streams` requests of S tokens fit in the usable blocks over
// all groups (blocks grow with S in full groups and stop at the cap in windowed ones); -1 when
// no group grows with S and the capped footprint fits.
int64_t hybrid_max_context(const std::vector<KVCacheGroupSpec>& groups, int64_t in_flight,
                           int32_t block_size, int64_t usable_blocks, int64_t streams) {
  auto blocks_at = [&](int64_t s) {
    int64_t total = 0;
    for (const KVCacheGroupSpec& g : groups) {
      total += group_blocks_per_request(g.kv_cache_spec, in_flight, s);
    }
    return total;
  };
  auto fits = [&](int64_t s) {
    const int64_t b = blocks_at(s);
    return b <= usable_blocks / streams;
  };
  const bool grows = std::any_of(groups.begin(), groups.end(), [](const KVCacheGroupSpec& g) {
    return g.kv_cache_spec.kind == KVCacheSpecKind::kFullAttention;
  });
  int64_t hi = 0;
  if (__builtin_mul_overflow(usable_blocks / streams + 1, block_size, &hi)) {
    hi = std::numeric_limits<int64_t>::max() / 4;  // beyond any pool: the search stays in range
  }
  if (!grows) {
    hi = 0;
    for (const KVCacheGroupSpec& g : groups) {
      hi = std::max(hi, tokens_per_request(g.kv_cache_spec, in_flight, 0));
    }
    if (fits(hi)) return -1;
  }
  if (!fits(1)) return 0;
  int64_t lo = 1;  // fits(lo) holds, fits(hi) does not
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

// The single-group layout of a model whose layers all use full attention.
void fill_full_attention_kv_cache_config(Plan& p) {
  const bool fits = p.num_gpu_blocks <= std::numeric_limits<int32_t>::max();
  p.kv_cache_config = make_full_attention_kv_cache_config(
      fits ? static_cast<int32_t>(p.num_gpu_blocks) : 0, p.block_size,
      static_cast<int32_t>(p.num_layers), p.page_size_bytes);
  // Replays refuse such a pool themselves (replay_setup), with the number; the plan's printed
  // output stays what it always was.
  if (!fits) p.kv_cache_config.kv_cache_tensors.clear();
}

std::string gib(double bytes) {
  return fmt::format("{:.2f} GiB", bytes / kGiB);
}

}  // namespace

double dtype_bytes(std::string_view dtype) {
  if (dtype == "bfloat16" || dtype == "float16" || dtype == "half" || dtype == "bf16") return 2;
  if (dtype == "float32" || dtype == "float") return 4;
  if (is_fp8_kv(dtype)) return 1;
  throw PlanError(
      fmt::format("unknown dtype '{}' (expected bfloat16, float16, float32 or fp8)", dtype));
}

int64_t kv_heads_per_rank(int64_t num_kv_heads, int64_t tp) {
  require(num_kv_heads > 0, fmt::format("num_kv_heads must be > 0 (got {})", num_kv_heads));
  require(tp > 0, fmt::format("{} must be > 0 (got {})", param("tensor_parallel_size"), tp));
  if (num_kv_heads >= tp) {
    require(num_kv_heads % tp == 0, fmt::format("num_kv_heads ({}) is not divisible by {} ({})",
                                                num_kv_heads, param("tensor_parallel_size"), tp));
    return num_kv_heads / tp;
  }
  require(tp % num_kv_heads == 0, fmt::format("{} ({}) is not a multiple of num_kv_heads ({})",
                                              param("tensor_parallel_size"), tp, num_kv_heads));
  return 1;  // each head replicated on tp / num_kv_heads ranks
}

int64_t page_size_bytes(const ModelSpec& m, int64_t heads, std::string_view kv_dtype,
                        int32_t block_size) {
  constexpr std::string_view kPage = "page size in bytes";
  if (m.use_mla) {
    if (kv_dtype == "fp8_ds_mla") return checked_mul(block_size, kFp8DsMlaBytesPerToken, kPage);
    const auto b = static_cast<int64_t>(dtype_bytes(kv_dtype));
    return checked_mul(checked_mul(block_size, m.kv_lora_rank + m.qk_rope_head_dim, kPage), b,
                       kPage);
  }
  const auto b = static_cast<int64_t>(dtype_bytes(kv_dtype));
  return checked_mul(
      checked_mul(checked_mul(int64_t{2} * block_size, heads, kPage), m.head_dim, kPage), b, kPage);
}

int64_t vllm_default_max_num_batched_tokens(const GpuSpec& gpu, int64_t max_model_len,
                                            std::optional<int64_t> max_num_seqs,
                                            VllmVersion vllm_version) {
  std::string name = gpu.name;
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // get_batch_defaults: 0.33's first tier (>= 160 GiB, any name), then >= 70 GiB non-A100.
  const int64_t large_tokens = vllm_behavior(vllm_version).large_card_batched_tokens;
  const bool large = large_tokens > 0 && gpu.vram_gib >= kLargeCardGib;
  const bool big = large || (gpu.vram_gib >= 70 && name.find("a100") == std::string::npos);
  const int64_t seqs = max_num_seqs.value_or(big ? 1024 : 256);
  int64_t cap = 0;
  if (__builtin_mul_overflow(seqs, max_model_len, &cap)) cap = std::numeric_limits<int64_t>::max();
  return std::min<int64_t>(cap, large ? large_tokens : big ? 8192 : 2048);
}

int64_t group_blocks_per_request(const KVCacheSpec& spec, int64_t in_flight,
                                 int64_t max_model_len) {
  const int64_t blocks = cdiv(tokens_per_request(spec, in_flight, max_model_len), spec.block_size);
  return spec.kind == KVCacheSpecKind::kSlidingWindow ? blocks + 1 : blocks;
}

int64_t vllm_num_gpu_blocks(int64_t available, int64_t page, int64_t layers) {
  // Python's // floors toward -inf; with a negative budget the result is clamped to 0 anyway.
  if (available <= 0) return 0;
  return available / page / layers;
}

double vllm_max_concurrency(int64_t n, int64_t max_model_len, int32_t block_size) {
  return static_cast<double>(n) / static_cast<double>(cdiv(max_model_len, block_size));
}

int64_t vllm_kv_cache_tokens(int64_t n, int64_t max_model_len, int32_t block_size) {
  const double c = static_cast<double>(n) / static_cast<double>(cdiv(max_model_len, block_size));
  const double tokens = c * static_cast<double>(max_model_len);
  require(tokens < 9.2e18,
          fmt::format("KV cache size of {} tokens is out of the 64-bit range", tokens));
  return static_cast<int64_t>(tokens);
}

int64_t pool_formula_concurrency(int64_t num_gpu_blocks, int32_t block_size,
                                 int64_t max_model_len) {
  return max_model_len > 0 ? num_gpu_blocks * block_size / max_model_len : 0;
}

std::string format_thousands(int64_t value) {
  const std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::vector<std::string> vllm_kv_cache_report_lines(const Plan& p) {
  // 0.26 kv_cache_utils.py:2169-2183 (two info_once lines); 0.33 kv_cache_utils.py:1136-1154
  // update_kv_cache_capacity (one line; "GPU" is the CUDA/ROCm pool name). %.2f and {:.2f} both
  // round the exact binary value half to even.
  const std::string size =
      fmt::format("GPU KV cache size: {} tokens", format_thousands(p.gpu_kv_cache_tokens));
  const std::string concurrency =
      fmt::format("Maximum concurrency for {} tokens per request: {:.2f}x",
                  format_thousands(p.max_model_len), p.vllm_max_concurrency);
  if (vllm_behavior(p.vllm_version).one_line_kv_cache_report) {
    return {size + ", " + concurrency};
  }
  return {size, concurrency};
}

std::string vllm_format_gib(int64_t bytes) {
  // round(x, 2) is the double nearest the correctly rounded 2-decimal string, which "{:.2f}"
  // gives (ties of exact binary values go to even, as Python's dtoa does); repr of that double
  // is the same digits without trailing zeros, one kept after the point (values far below 2^53).
  std::string s = fmt::format("{:.2f}", static_cast<double>(bytes) / kGiB);
  while (s.size() > 1 && s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();
  return s;
}

Plan compute_plan(const PlanInputs& in) {
  try {
    validate_model_spec(in.model);
  } catch (const std::invalid_argument& e) {
    throw PlanError(e.what());
  }
  validate_model_bounds(in.model);
  const ModelSpec& m = in.model;
  require(std::isfinite(in.gpu.vram_gib) && in.gpu.vram_gib > 0 && in.gpu.vram_gib <= kMaxVramGib,
          fmt::format("{} must be in (0, {:g}] (got {:g})", param("vram_gib"), kMaxVramGib,
                      in.gpu.vram_gib));
  require(in.gpu_memory_utilization > 0 && in.gpu_memory_utilization <= 1,
          fmt::format("{} must be in (0, 1] (got {})", param("gpu_memory_utilization"),
                      in.gpu_memory_utilization));
  require(std::isfinite(in.overhead_gib) && in.overhead_gib >= 0 && in.overhead_gib <= kMaxVramGib,
          fmt::format("{} must be in [0, {:g}] (got {:g})", param("overhead_gib"), kMaxVramGib,
                      in.overhead_gib));
  require(!in.weights_gib || (std::isfinite(*in.weights_gib) && *in.weights_gib >= 0 &&
                              *in.weights_gib <= kMaxVramGib),
          fmt::format("{} must be in [0, {:g}] (got {:g})", param("weights_gib"), kMaxVramGib,
                      in.weights_gib.value_or(0)));
  require(in.block_size > 0 && in.block_size <= kMaxBlockSize,
          fmt::format("{} must be in [1, {}] (got {})", param("block_size"), kMaxBlockSize,
                      in.block_size));
  require(in.max_model_len >= 0,
          fmt::format("{} must be > 0 (got {})", param("max_model_len"), in.max_model_len));
  require(!in.concurrency || *in.concurrency > 0,
          fmt::format("{} must be > 0 (got {})", param("concurrency"), in.concurrency.value_or(0)));
  require(!in.num_gpu_blocks_override || *in.num_gpu_blocks_override > 0,
          fmt::format("{} must be > 0 (got {})", param("num_gpu_blocks_override"),
                      in.num_gpu_blocks_override.value_or(0)));
  require(in.tensor_parallel_size > 0 && in.tensor_parallel_size <= kMaxTensorParallelSize,
          fmt::format("{} must be in [1, {}] (got {})", param("tensor_parallel_size"),
                      kMaxTensorParallelSize, in.tensor_parallel_size));
  if (m.num_attention_heads > 0) {
    require(
        m.num_attention_heads % in.tensor_parallel_size == 0,
        fmt::format("num_attention_heads ({}) is not divisible by {} ({})", m.num_attention_heads,
                    param("tensor_parallel_size"), in.tensor_parallel_size));
  }

  Plan p;
  p.vllm_version = in.vllm_version;
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
  p.max_model_len = in.max_model_len > 0 ? in.max_model_len : m.max_position_embeddings;
  require(p.max_model_len > 0, fmt::format("model '{}' has no max_position_embeddings: pass {}",
                                           m.name, param("max_model_len")));
  if (m.max_position_embeddings > 0 && p.max_model_len > m.max_position_embeddings) {
    p.warnings.push_back(fmt::format(
        "max_model_len {} exceeds the model's max_position_embeddings {} (vLLM refuses this "
        "unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)",
        p.max_model_len, m.max_position_embeddings));
  }

  // KV shape per rank.
  if (m.use_mla) {
    p.num_kv_heads_per_rank = 1;
    p.head_dim = m.kv_lora_rank + m.qk_rope_head_dim;
    p.notes.push_back(fmt::format(
        "MLA: one latent of kv_lora_rank + qk_rope_head_dim = {} values per token and layer (no "
        "separate K and V), replicated on every tensor-parallel rank",
        p.head_dim));
  } else {
    p.num_kv_heads_per_rank = kv_heads_per_rank(m.num_kv_heads, in.tensor_parallel_size);
    p.head_dim = m.head_dim;
    if (m.num_kv_heads < in.tensor_parallel_size) {
      p.notes.push_back(fmt::format("{} KV heads < TP {}: each rank holds one replicated head",
                                    m.num_kv_heads, in.tensor_parallel_size));
    }
  }
  if (m.num_parameters_estimated && !in.weights_gib) {
    p.notes.push_back(fmt::format("parameter count {:.3f}e9 estimated from the config's shapes",
                                  m.num_parameters / 1e9));
  }

  // Scheduler knobs and the hybrid manager (vLLM VllmConfig.max_in_flight_tokens and
  // config/vllm.py's rule for --disable-hybrid-kv-cache-manager).
  require(!in.max_num_batched_tokens ||
              (*in.max_num_batched_tokens > 0 && *in.max_num_batched_tokens <= kMaxBatchTokens),
          fmt::format("{} must be in [1, {}] (got {})", param("max_num_batched_tokens"),
                      kMaxBatchTokens, in.max_num_batched_tokens.value_or(0)));
  require(!in.max_num_seqs || (*in.max_num_seqs > 0 && *in.max_num_seqs <= kMaxBatchTokens),
          fmt::format("{} must be in [1, {}] (got {})", param("max_num_seqs"), kMaxBatchTokens,
                      in.max_num_seqs.value_or(0)));
  p.max_num_batched_tokens = in.max_num_batched_tokens.value_or(vllm_default_max_num_batched_tokens(
      in.gpu, p.max_model_len, in.max_num_seqs, in.vllm_version));
  p.async_scheduling = in.async_scheduling;
  p.max_in_flight_tokens =
      checked_mul(in.async_scheduling ? 2 : 1, p.max_num_batched_tokens, "max_in_flight_tokens");
  const int64_t num_full = count_layers(m, KVCacheSpecKind::kFullAttention);
  const int64_t num_chunked = count_layers(m, KVCacheSpecKind::kChunkedLocalAttention);
  p.hybrid_model = num_full != m.num_layers;
  if (p.hybrid_model) {
    if (in.disable_hybrid_kv_cache_manager) {
      p.hybrid_kv_cache_manager = !*in.disable_hybrid_kv_cache_manager;
      p.hybrid_manager_reason = p.hybrid_kv_cache_manager
                                    ? "enabled (--no-disable-hybrid-kv-cache-manager)"
                                    : "disabled (--disable-hybrid-kv-cache-manager)";
    } else if (num_chunked > 0) {
      p.hybrid_kv_cache_manager = false;
      p.hybrid_manager_reason =
          "disabled: vLLM's default for chunked local attention (latency regression; "
          "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 or "
          "--no-disable-hybrid-kv-cache-manager enables it)";
    } else {
      p.hybrid_kv_cache_manager = true;
      p.hybrid_manager_reason = "enabled (vLLM's default)";
    }
    require(!p.hybrid_kv_cache_manager || num_chunked == 0 ||
                count_layers(m, KVCacheSpecKind::kSlidingWindow) == 0,
            fmt::format("model '{}' mixes sliding-window and chunked layers (vLLM refuses this)",
                        m.name));
    if (p.hybrid_kv_cache_manager && count_layers(m, KVCacheSpecKind::kSlidingWindow) > 0) {
      require(in.block_size % kSlidingWindowKernelBlock == 0,
              fmt::format("{}: vLLM's sliding-window layers use the attention backend's "
                          "{}-token kernel block rescaled to the full layers' page; kvsim models "
                          "block sizes that are multiples of {}",
                          param("block_size", std::to_string(in.block_size)),
                          kSlidingWindowKernelBlock, kSlidingWindowKernelBlock));
    }
    if (p.hybrid_kv_cache_manager) {
      const bool chunked = num_chunked > 0;
      p.notes.push_back(fmt::format(
          "hybrid KV cache: {} layers use a {} of {} tokens, {} hold the whole sequence; vLLM "
          "reserves at most {} + {} in-flight tokens per request for each windowed layer and "
          "frees the blocks that fall out",
          m.num_layers - num_full, chunked ? "local chunk" : "sliding window",
          chunked ? m.attention_chunk_size : m.sliding_window, num_full,
          chunked ? fmt::format("the chunk {}", m.attention_chunk_size)
                  : fmt::format("W-1 = {}", m.sliding_window - 1),
          format_thousands(p.max_in_flight_tokens)));
    } else {
      p.notes.push_back(fmt::format(
          "hybrid KV cache manager {}: every layer is sized as full attention ({}; vLLM still "
          "computes the window, it only stops saving its memory)",
          p.hybrid_manager_reason,
          m.sliding_window_note.empty() ? "windowed layers" : m.sliding_window_note));
    }
  }

  // Weights. With --kv-cache-memory-bytes they do not enter the cache size; unknown weights are
  // then shown as 0.
  if (in.weights_gib) {
    p.weights_from_flag = true;
    p.weights_gib = *in.weights_gib;
    p.weights_bytes = to_bytes(*in.weights_gib * kGiB, param("weights_gib"));
  } else if (m.num_parameters > 0 || !in.kv_cache_memory_bytes) {
    require(m.num_parameters > 0, fmt::format("weights of model '{}' unknown: pass {} or {}",
                                              m.name, param("weights_gib"), param("num_params")));
    const auto [bytes, per_param] = weight_bytes(m, p.quantization, in.tensor_parallel_size);
    p.weight_bytes_per_param = per_param;
    p.weights_gib = bytes / kGiB;
    p.weights_bytes = to_bytes(bytes, "the weights");
  }

  // The lesson's arithmetic, operation for operation (Card.kv_budget_gib, max_concurrency,
  // max_context in vram_planner.py).
  p.usable_gib = in.gpu_memory_utilization * in.gpu.vram_gib;
  p.kv_budget_gib = p.usable_gib - p.weights_gib - in.overhead_gib;
  if (in.kv_cache_memory_bytes) {
    require(*in.kv_cache_memory_bytes > 0,
            fmt::format("{} must be > 0 (got {})", param("kv_cache_memory_bytes"),
                        *in.kv_cache_memory_bytes));
    p.kv_cache_memory_from_flag = true;
    p.kv_budget_gib = static_cast<double>(*in.kv_cache_memory_bytes) / kGiB;
  }
  const int64_t page = page_size_bytes(m, p.num_kv_heads_per_rank, p.kv_cache_dtype, in.block_size);
  p.page_size_bytes = page;
  p.bytes_per_block = checked_mul(page, m.num_layers, "bytes per block");
  // Bytes per token over all layers: page / block_size is exact (page is block_size * ...).
  p.kappa_bytes = checked_mul(page / in.block_size, m.num_layers, "KV bytes per token");
  p.kv_per_seq_bytes =
      checked_mul(p.kappa_bytes, p.max_model_len, "KV bytes per sequence (kappa x max_model_len)");
  if (p.kv_budget_gib > 0) {
    const double per_seq_gib = static_cast<double>(p.kv_per_seq_bytes) / kGiB;
    // Both quotients are below budget bytes (<= 1e6 GiB) / 1 byte: no int64 overflow.
    p.max_concurrency = static_cast<int64_t>(p.kv_budget_gib / per_seq_gib);
    if (in.concurrency) {
      p.max_context_tokens = static_cast<int64_t>(
          p.kv_budget_gib * kGiB /
          (static_cast<double>(p.kappa_bytes) * static_cast<double>(*in.concurrency)));
    }
  } else if (in.concurrency) {
    p.max_context_tokens = 0;
  }

  // vLLM: requested = ceil(total * util); available = requested - non-KV memory, or
  // kv_cache_memory_bytes when given.
  const double total_bytes = in.gpu.vram_gib * kGiB;
  const int64_t requested = to_bytes(std::ceil(total_bytes * in.gpu_memory_utilization),
                                     param("vram_gib") + " x utilization");
  const int64_t overhead_bytes = to_bytes(in.overhead_gib * kGiB, param("overhead_gib"));
  p.kv_budget_bytes =
      in.kv_cache_memory_bytes.value_or(requested - p.weights_bytes - overhead_bytes);

  if (!in.num_gpu_blocks_override && (p.kv_budget_gib <= 0 || p.kv_budget_bytes <= 0)) {
    throw DoesNotFitError(
        fmt::format("model '{}' does not fit on '{}': KV budget = {} x {} GiB - {:.2f} GiB "
                    "weights - {:.2f} GiB overhead = {:.2f} GiB (<= 0)",
                    m.name, in.gpu.name, in.gpu_memory_utilization, in.gpu.vram_gib, p.weights_gib,
                    in.overhead_gib, p.kv_budget_gib),
        kVllmNoAvailableMemory);
  }
  if (p.kv_budget_gib <= 0) {
    p.warnings.push_back(fmt::format(
        "the KV budget from the card is {:.2f} GiB (<= 0); the pool size comes only from "
        "--num-gpu-blocks-override",
        p.kv_budget_gib));
  }

  // The layout: one full-attention group of all layers, or vLLM's hybrid grouping.
  std::vector<KVCacheGroupSpec> groups;
  if (p.hybrid_kv_cache_manager) {
    groups = group_layers(m, in.block_size, page, p.kv_cache_group_size);
  } else {
    p.kv_cache_group_size = m.num_layers;
    KVCacheGroupSpec g;
    g.kv_cache_spec = layer_spec(m, KVCacheSpecKind::kFullAttention, in.block_size, page);
    for (int64_t layer = 0; layer < m.num_layers; ++layer) {
      g.layer_indices.push_back(static_cast<int32_t>(layer));
    }
    groups.push_back(std::move(g));
  }
  p.blocks_per_request = 0;
  for (const KVCacheGroupSpec& g : groups) {
    PlanKVCacheGroup pg;
    pg.kind = g.kv_cache_spec.kind;
    pg.window_tokens = g.kv_cache_spec.sliding_window + g.kv_cache_spec.attention_chunk_size;
    pg.num_layers = static_cast<int64_t>(g.layer_indices.size());
    pg.num_padding_layers = p.kv_cache_group_size - pg.num_layers;
    pg.tokens_per_request =
        tokens_per_request(g.kv_cache_spec, p.max_in_flight_tokens, p.max_model_len);
    pg.blocks_per_request =
        group_blocks_per_request(g.kv_cache_spec, p.max_in_flight_tokens, p.max_model_len);
    pg.max_memory_usage_bytes = checked_mul(pg.blocks_per_request, page, "group bytes");
    p.blocks_per_request += pg.blocks_per_request;
    p.kv_cache_groups.push_back(pg);
  }

  // The lesson in hybrid form: the windowed layers' kappa stops growing at their cap.
  const int64_t per_layer_token = page / in.block_size;
  const int64_t windowed_layers = p.hybrid_kv_cache_manager ? m.num_layers - num_full : 0;
  p.kappa_windowed_bytes = per_layer_token * windowed_layers;
  p.kappa_full_bytes = p.kappa_bytes - p.kappa_windowed_bytes;
  for (const KVCacheGroupSpec& g : groups) {
    if (g.kv_cache_spec.kind != KVCacheSpecKind::kFullAttention) {
      p.windowed_tokens_cap =
          tokens_per_request(g.kv_cache_spec, p.max_in_flight_tokens, p.max_model_len);
    }
  }
  require(!__builtin_add_overflow(
              checked_mul(p.kappa_full_bytes, p.max_model_len, "KV bytes per sequence"),
              checked_mul(p.kappa_windowed_bytes, p.windowed_tokens_cap, "windowed KV bytes"),
              &p.hybrid_kv_per_seq_bytes),
          "hybrid KV bytes per sequence overflow 64-bit integers");
  if (p.kv_budget_gib > 0) {
    const double budget = p.kv_budget_gib * kGiB;
    p.hybrid_max_concurrency = static_cast<int64_t>(
        p.kv_budget_gib / (static_cast<double>(p.hybrid_kv_per_seq_bytes) / kGiB));
    if (in.concurrency && p.kappa_full_bytes > 0) {
      // Solve kappa_full * S + kappa_windowed * min(cap, S) = K / N for S (the cap without
      // max_model_len's bound: S is the unknown here).
      const double per_stream = budget / static_cast<double>(*in.concurrency);
      double cap = 0;
      for (const KVCacheGroupSpec& g : groups) {
        if (g.kv_cache_spec.kind != KVCacheSpecKind::kFullAttention) {
          cap = static_cast<double>(tokens_per_request(g.kv_cache_spec, p.max_in_flight_tokens, 0));
        }
      }
      double s = (per_stream - static_cast<double>(p.kappa_windowed_bytes) * cap) /
                 static_cast<double>(p.kappa_full_bytes);
      if (s < cap) s = per_stream / static_cast<double>(p.kappa_bytes);
      p.hybrid_max_context_tokens = static_cast<int64_t>(s);
    }
  } else if (in.concurrency) {
    p.hybrid_max_context_tokens = 0;
  }

  // vLLM's block arithmetic (get_kv_cache_configs): group_size pools of one page per block.
  p.bytes_per_block = checked_mul(page, p.kv_cache_group_size, "bytes per block");
  int64_t available = p.kv_budget_bytes;
  p.num_gpu_blocks = vllm_num_gpu_blocks(available, page, p.kv_cache_group_size);
  if (in.num_gpu_blocks_override) {
    p.num_gpu_blocks = *in.num_gpu_blocks_override;
    p.num_gpu_blocks_overridden = true;
    available = checked_mul(*in.num_gpu_blocks_override, p.bytes_per_block,
                            param("num_gpu_blocks_override") + " x bytes per block");
  }
  // _check_enough_kv_cache_memory. vLLM 0.33 checks against the memory less one block, the null
  // block BlockPool holds back (kv_cache_planning.py:1533-1555): a pool of one block is "no
  // memory", and a request needing every block does not fit. 0.26 checks the whole memory.
  const bool hold_null = vllm_behavior(in.vllm_version).fit_check_holds_null_block;
  const int64_t check = hold_null ? available - p.bytes_per_block : available;
  const int64_t check_blocks = hold_null ? p.num_gpu_blocks - 1 : p.num_gpu_blocks;
  if (check <= 0) {
    throw DoesNotFitError(
        fmt::format("model '{}' does not fit on '{}': the available KV cache memory ({} B, {} "
                    "block(s) of {} B) leaves no block beside the null block",
                    m.name, in.gpu.name, format_thousands(available),
                    format_thousands(p.num_gpu_blocks), format_thousands(p.bytes_per_block)),
        kVllmNoAvailableMemory);
  }
  // _max_memory_usage_bytes_from_groups: group_size x page x the blocks of every group.
  const int64_t needed =
      checked_mul(p.bytes_per_block, p.blocks_per_request, "KV bytes of one max_model_len request");
  if (needed > check) {
    // vLLM's estimate_max_model_len: the longest max_model_len in [1, max_model_len] whose
    // request fits the checked blocks, every group counted (a window group's blocks stop
    // growing at its cap); 0 when not even one token fits.
    int64_t longest = hybrid_max_context(groups, p.max_in_flight_tokens, in.block_size,
                                         check_blocks, /*streams=*/1);
    if (longest < 0 || longest > p.max_model_len) longest = p.max_model_len;
    const std::string vllm_error = fmt::format(
        "To serve at least one request with the model's max seq len ({}), ({} GiB KV cache is "
        "needed, which is larger than the available KV cache memory ({} GiB). {}Try increasing "
        "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or "
        "decreasing `max_model_len` when initializing the engine. See "
        "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
        p.max_model_len, vllm_format_gib(needed), vllm_format_gib(check),
        longest > 0 ? fmt::format("Based on the available memory, the estimated maximum model "
                                  "length is {}. ",
                                  longest)
                    : "");
    throw DoesNotFitError(
        fmt::format("model '{}' does not fit on '{}': one request of max_model_len {} needs {} of "
                    "KV cache ({} blocks of {} tokens), the available KV cache memory is {} ({} "
                    "blocks{}); the longest max_model_len that fits is {}",
                    m.name, in.gpu.name, p.max_model_len, gib(static_cast<double>(needed)),
                    p.blocks_per_request, in.block_size, gib(static_cast<double>(check)),
                    check_blocks, hold_null ? " beside the null block" : "", longest),
        vllm_error);
  }
  // get_max_concurrency_for_kv_cache_config: N / num_block_per_request (for one full group this
  // is N / cdiv(L, bs)); the KV cache size line is int(max_concurrency * L).
  p.vllm_max_concurrency =
      static_cast<double>(p.num_gpu_blocks) / static_cast<double>(p.blocks_per_request);
  const double tokens = p.vllm_max_concurrency * static_cast<double>(p.max_model_len);
  require(tokens < 9.2e18,
          fmt::format("KV cache size of {} tokens is out of the 64-bit range", tokens));
  p.gpu_kv_cache_tokens = static_cast<int64_t>(tokens);
  p.usable_blocks = p.num_gpu_blocks - 1;
  if (in.concurrency) {
    p.vllm_max_context_tokens =
        p.hybrid_kv_cache_manager
            ? hybrid_max_context(groups, p.max_in_flight_tokens, in.block_size, p.usable_blocks,
                                 *in.concurrency)
            : p.usable_blocks / *in.concurrency * in.block_size;
  }
  if (p.blocks_per_request == p.num_gpu_blocks) {
    p.full_length_request_unservable = true;
    p.warnings.push_back(fmt::format(
        "a request of max_model_len {} needs {} blocks = num_gpu_blocks, but only {} are usable "
        "(block 0 is the null block): vLLM starts, yet such a request is never admitted",
        p.max_model_len, p.blocks_per_request, p.usable_blocks));
  }
  if (p.hybrid_kv_cache_manager) {
    const bool fits = p.num_gpu_blocks <= std::numeric_limits<int32_t>::max();
    p.kv_cache_config.num_blocks = fits ? static_cast<int32_t>(p.num_gpu_blocks) : 0;
    if (fits) {
      p.kv_cache_config.kv_cache_tensors =
          shared_tensors(groups, p.kv_cache_group_size, page, p.num_gpu_blocks);
    }
    p.kv_cache_config.kv_cache_groups = std::move(groups);
  } else {
    fill_full_attention_kv_cache_config(p);
  }
  return p;
}

}  // namespace kvsim
