// Hugging Face config.json -> ModelSpec.
#include "kvsim/sim/io/model_config.h"

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "kvsim/core/param.h"
#include "kvsim/core/planner.h"
#include "kvsim/sim/io/line_reader.h"
#include "kvsim/sim/io/strict_json.h"

namespace kvsim {
namespace {

using nlohmann::json;

// Config-only bounds (the shape bounds are the planner's, planner.h): widths feed only the
// parameter estimate, which is bounded as a whole; positions stay in the replay's int32 range.
constexpr int64_t kMaxWidth = int64_t{1} << 24;
constexpr int64_t kMaxPositions = INT32_MAX;
// The largest config.json read: real ones are a few KiB.
constexpr int64_t kMaxConfigBytes = int64_t{16} << 20;

// Reads one config object; errors name the source, the line of the field and the field.
class ConfigReader {
 public:
  ConfigReader(const json& obj, std::string_view text, std::string source, std::string prefix)
      : obj_(obj), text_(text), source_(std::move(source)), prefix_(std::move(prefix)) {}

  bool has(const char* field) const {
    auto it = obj_.find(field);
    return it != obj_.end() && !it->is_null();
  }

  // A positive integer (JSON integer, or a float with an integral value such as 4096.0).
  int64_t positive_int(const char* field) const {
    const json& v = obj_.at(field);
    if (v.is_number_integer() || v.is_number_unsigned()) {
      const int64_t x = v.get<int64_t>();
      if (x > 0) return x;
    } else if (v.is_number_float()) {
      const double d = v.get<double>();
      if (d > 0 && d < 9.0e15 && static_cast<double>(static_cast<int64_t>(d)) == d) {
        return static_cast<int64_t>(d);
      }
    }
    fail(field, fmt::format("expected a positive integer, got {}", v.dump()));
  }

  // A positive integer <= max (the planner's shape bounds, planner.h).
  int64_t bounded_int(const char* field, int64_t max) const {
    const int64_t x = positive_int(field);
    if (x > max) fail(field, fmt::format("{} is out of range [1, {}]", x, max));
    return x;
  }

  int64_t required_int(const char* field, int64_t max) const {
    if (!has(field)) fail(field, "missing (required)");
    return bounded_int(field, max);
  }

  int64_t optional_int(const char* field, int64_t fallback, int64_t max) const {
    return has(field) ? bounded_int(field, max) : fallback;
  }

  // Like optional_int but 0 is allowed (first_k_dense_replace, n_shared_experts).
  int64_t optional_count(const char* field, int64_t max) const {
    if (!has(field)) return 0;
    const json& v = obj_.at(field);
    if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= max) {
      return v.get<int64_t>();
    }
    fail(field, fmt::format("expected an integer in [0, {}], got {}", max, v.dump()));
  }

  bool optional_bool(const char* field, bool fallback) const {
    if (!has(field)) return fallback;
    const json& v = obj_.at(field);
    if (!v.is_boolean()) fail(field, fmt::format("expected true or false, got {}", v.dump()));
    return v.get<bool>();
  }

  std::string optional_string(const char* field) const {
    if (!has(field)) return {};
    const json& v = obj_.at(field);
    if (!v.is_string()) fail(field, fmt::format("expected a string, got {}", v.dump()));
    return v.get<std::string>();
  }

  const json& object() const { return obj_; }

  [[noreturn]] void fail(std::string_view field, const std::string& what) const {
    const std::string quoted = fmt::format("\"{}\"", field);
    const size_t pos = text_.find(quoted);
    int64_t line = 0;
    if (pos != std::string_view::npos) {
      line = 1;
      for (size_t i = 0; i < pos; ++i) line += text_[i] == '\n' ? 1 : 0;
    }
    const std::string where = line > 0 ? fmt::format("{}:{}", source_, line) : source_;
    throw std::runtime_error(fmt::format("{}: field '{}{}': {}", where, prefix_, field, what));
  }

 private:
  const json& obj_;
  std::string_view text_;
  std::string source_;
  std::string prefix_;
};

std::string serving_dtype(const ConfigReader& r) {
  const char* field = r.has("torch_dtype") ? "torch_dtype" : "dtype";
  std::string d = r.optional_string(field);
  if (d.empty()) return "bfloat16";  // vLLM's choice when the config is silent
  if (d == "bfloat16" || d == "float16") return d;
  // vLLM's dtype=auto serves float32 checkpoints in bfloat16 (it never defaults to fp32).
  if (d == "float32") return "bfloat16";
  r.fail(field, fmt::format("unsupported dtype '{}' (expected bfloat16, float16 or float32)", d));
}

// The layer kinds from a layer_types array ("sliding_attention" / "full_attention").
std::vector<KVCacheSpecKind> layer_types_from_array(const ConfigReader& r, int64_t num_layers) {
  const json& a = r.object()["layer_types"];
  if (!a.is_array() || static_cast<int64_t>(a.size()) != num_layers) {
    r.fail("layer_types",
           fmt::format("expected an array of {} strings (one per layer)", num_layers));
  }
  std::vector<KVCacheSpecKind> out;
  for (const json& t : a) {
    const std::string name = t.is_string() ? t.get<std::string>() : t.dump();
    if (name == "sliding_attention") {
      out.push_back(KVCacheSpecKind::kSlidingWindow);
    } else if (name == "full_attention") {
      out.push_back(KVCacheSpecKind::kFullAttention);
    } else {
      r.fail("layer_types", fmt::format("unsupported layer type '{}' (kvsim knows "
                                        "sliding_attention and full_attention)",
                                        name));
    }
  }
  return out;
}

// Per-layer attention kinds as vLLM 0.26's model code builds them from the config (after
// transformers' config defaults):
//   chunked local (Llama 4): attention_chunk_size set; layer i is full attention (NoPE) when
//     no_rope_layers[i] == 0, chunked otherwise; an absent or empty no_rope_layers means a NoPE
//     layer every no_rope_layer_interval (default 4) layers (transformers Llama4TextConfig).
//   sliding window (sliding_window set and use_sliding_window not false):
//     gpt_oss: even layers sliding (gpt_oss.py: layer_idx % 2 == 0; layer_types is ignored);
//     otherwise layer_types when given; gemma3/gemma3_text: every sliding_window_pattern-th
//     (default 6) layer full; gemma2: every 2nd layer full; any other model: every layer
//     windowed (vLLM applies the config's window to all layers, as for Mistral-7B-v0.1).
void read_attention_layout(const ConfigReader& r, ModelSpec& m) {
  const std::string model_type = r.optional_string("model_type");
  if (r.has("attention_chunk_size")) {
    m.attention_chunk_size = r.bounded_int("attention_chunk_size", kMaxPositions);
    const json* nope = r.has("no_rope_layers") ? &r.object()["no_rope_layers"] : nullptr;
    if (nope != nullptr && !(nope->is_array())) r.fail("no_rope_layers", "expected an array");
    if (nope != nullptr && !nope->empty()) {
      if (static_cast<int64_t>(nope->size()) != m.num_layers) {
        r.fail("no_rope_layers", fmt::format("expected {} entries (one per layer), got {}",
                                             m.num_layers, nope->size()));
      }
      for (const json& v : *nope) {
        if (!v.is_number_integer()) r.fail("no_rope_layers", "expected integers (0 or 1)");
        m.layer_types.push_back(v.get<int64_t>() == 0 ? KVCacheSpecKind::kFullAttention
                                                      : KVCacheSpecKind::kChunkedLocalAttention);
      }
    } else {
      m.layer_types =
          every_nth_full(m.num_layers, r.optional_int("no_rope_layer_interval", 4, kMaxNumLayers),
                         KVCacheSpecKind::kChunkedLocalAttention);
    }
    m.sliding_window_note =
        fmt::format("{} of {} layers use chunked local attention ({} tokens per chunk)",
                    count_layers(m, KVCacheSpecKind::kChunkedLocalAttention), m.num_layers,
                    m.attention_chunk_size);
    return;
  }
  if (!r.has("sliding_window") || !r.optional_bool("use_sliding_window", true)) return;
  m.sliding_window = r.bounded_int("sliding_window", kMaxPositions);
  if (model_type == "gpt_oss") {
    m.layer_types = alternating_sliding(m.num_layers);
  } else if (r.has("layer_types")) {
    m.layer_types = layer_types_from_array(r, m.num_layers);
  } else if (model_type == "gemma3" || model_type == "gemma3_text") {
    m.layer_types =
        every_nth_full(m.num_layers, r.optional_int("sliding_window_pattern", 6, kMaxNumLayers),
                       KVCacheSpecKind::kSlidingWindow);
  } else if (model_type == "gemma2") {
    m.layer_types = every_nth_full(m.num_layers, 2, KVCacheSpecKind::kSlidingWindow);
  } else {
    m.layer_types.assign(static_cast<size_t>(m.num_layers), KVCacheSpecKind::kSlidingWindow);
  }
  m.sliding_window_note =
      model_type == "gemma2"
          ? "gemma-2 alternates sliding-window and global attention layers"
          : fmt::format("{} of {} layers use the sliding window",
                        count_layers(m, KVCacheSpecKind::kSlidingWindow), m.num_layers);
}

}  // namespace

ModelSpec parse_hf_config(std::string_view text, const std::string& source) {
  // Strict: a repeated key (which a plain parse resolves to its last value), a NUL byte
  // (which ends a plain parse early) and trailing garbage are refused with the line.
  const json root = parse_strict_json(text, source);
  if (!root.is_object()) {
    throw std::runtime_error(fmt::format("{}: expected a JSON object at the top level", source));
  }
  const bool use_text_config = !root.contains("num_hidden_layers") &&
                               root.contains("text_config") && root["text_config"].is_object();
  const json& obj = use_text_config ? root["text_config"] : root;
  const ConfigReader r(obj, text, source, use_text_config ? "text_config." : "");
  const ConfigReader top(root, text, source, "");

  ModelSpec m;
  m.name = source;
  m.num_layers = r.required_int("num_hidden_layers", kMaxNumLayers);
  m.num_attention_heads = r.required_int("num_attention_heads", kMaxHeads);
  m.num_kv_heads = r.optional_int("num_key_value_heads", m.num_attention_heads, kMaxHeads);
  m.hidden_size = r.optional_int("hidden_size", 0, kMaxWidth);
  m.intermediate_size = r.optional_int("intermediate_size", 0, kMaxWidth);
  m.vocab_size = r.optional_int("vocab_size", 0, kMaxWidth);
  m.tie_word_embeddings = r.optional_bool("tie_word_embeddings", false);
  m.max_position_embeddings = r.optional_int("max_position_embeddings", 0, kMaxPositions);
  m.dtype = serving_dtype(r.has("torch_dtype") || r.has("dtype") ? r : top);
  if (r.has("head_dim")) {
    m.head_dim = r.bounded_int("head_dim", kMaxHeadDim);
  } else {
    if (m.hidden_size == 0) r.fail("head_dim", "missing, and hidden_size is missing too");
    if (m.hidden_size % m.num_attention_heads != 0) {
      r.fail("head_dim", fmt::format("missing, and hidden_size {} is not divisible by "
                                     "num_attention_heads {}",
                                     m.hidden_size, m.num_attention_heads));
    }
    m.head_dim = m.hidden_size / m.num_attention_heads;
  }
  if (m.num_kv_heads > m.num_attention_heads) {
    r.fail("num_key_value_heads",
           fmt::format("{} exceeds num_attention_heads {}", m.num_kv_heads, m.num_attention_heads));
  }

  ParameterShapes shapes;
  // MLA.
  if (r.has("kv_lora_rank")) {
    m.use_mla = true;
    m.kv_lora_rank = r.bounded_int("kv_lora_rank", kMaxHeadDim);
    m.qk_rope_head_dim = r.required_int("qk_rope_head_dim", kMaxHeadDim);
    shapes.qk_nope_head_dim = r.optional_int("qk_nope_head_dim", 0, kMaxHeadDim);
    shapes.v_head_dim = r.optional_int("v_head_dim", 0, kMaxHeadDim);
    shapes.q_lora_rank = r.optional_int("q_lora_rank", 0, kMaxWidth);
    if (!r.has("head_dim") && shapes.qk_nope_head_dim > 0) {
      m.head_dim = shapes.qk_nope_head_dim + m.qk_rope_head_dim;
    }
  }
  read_attention_layout(r, m);
  // Mixture of experts.
  for (const char* f : {"n_routed_experts", "num_local_experts", "num_experts"}) {
    if (r.has(f)) {
      m.num_experts = r.bounded_int(f, kMaxHeads);
      break;
    }
  }
  if (m.num_experts > 0) {
    m.num_experts_per_tok = r.required_int("num_experts_per_tok", m.num_experts);
    // Mixtral-style configs give the expert width as intermediate_size.
    shapes.moe_intermediate_size =
        r.optional_int("moe_intermediate_size", m.intermediate_size, kMaxWidth);
    shapes.num_shared_experts = r.optional_count("n_shared_experts", kMaxHeads);
    shapes.shared_expert_intermediate =
        r.optional_count("shared_expert_intermediate_size", kMaxWidth);
    shapes.first_k_dense_replace = r.optional_count("first_k_dense_replace", kMaxNumLayers);
  }
  shapes.attention_bias =
      r.optional_bool("attention_bias", r.optional_string("model_type") == "qwen2");
  // Weight quantization of the checkpoint.
  const ConfigReader& qsrc = top.has("quantization_config") ? top : r;
  if (qsrc.has("quantization_config")) {
    const json& q = qsrc.object()["quantization_config"];
    if (!q.is_object()) qsrc.fail("quantization_config", "expected an object");
    const ConfigReader qr(q, text, source, "quantization_config.");
    const std::string method = qr.optional_string("quant_method");
    if (method == "fp8" || method == "awq" || method == "gptq" || method == "mxfp4") {
      m.checkpoint_quantization = method;
    } else {
      qr.fail("quant_method",
              fmt::format("unsupported '{}' (kvsim knows fp8, awq, gptq and mxfp4; pass {} after "
                          "removing quantization_config)",
                          method, param("weights_gib")));
    }
  }

  const ParameterEstimate est = estimate_parameters(m, shapes);
  if (est.total > kMaxNumParams) {
    throw std::runtime_error(fmt::format(
        "{}: the shapes give {:g} parameters, more than the planner's limit of {:g} (check "
        "hidden_size, intermediate_size, vocab_size and num_hidden_layers)",
        source, est.total, kMaxNumParams));
  }
  m.num_parameters = est.total;
  m.num_active_parameters = est.active;
  m.num_parameters_estimated = est.total > 0;
  try {
    validate_model_spec(m);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("{}: {}", source, e.what()));
  }
  return m;
}

ModelSpec load_hf_config(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw std::runtime_error(fmt::format("{}: is a directory, not a config.json file", path));
  }
  // A config is small: its limit stops /dev/zero or a wrong path early, with the path named.
  InputLimits limits;
  limits.max_bytes = kMaxConfigBytes;
  limits.max_line_bytes = 0;  // minified configs are one line
  limits.has_flags = false;
  return parse_hf_config(read_text_file(path, limits), path);
}

}  // namespace kvsim
