// Hugging Face config.json reading: real configs (fixtures in tests/data/) and the error paths.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kvsim/core/model_presets.h"
#include "kvsim/core/planner.h"
#include "kvsim/sim/io/model_config.h"

namespace kvsim {
namespace {

std::string data(const std::string& name) {
  return std::string(KVSIM_SOURCE_DIR) + "/tests/data/" + name;
}

// The error message of `parse_hf_config(text)`, or "" if it did not throw.
std::string parse_error(const std::string& text) {
  try {
    parse_hf_config(text, "cfg.json");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfig, Qwen25MatchesThePreset) {
  const ModelSpec m = load_hf_config(data("hf_qwen2.5-7b-instruct.json"));
  const ModelSpec& p = find_model_preset("qwen2.5-7b");
  EXPECT_EQ(m.num_layers, p.num_layers);
  EXPECT_EQ(m.num_attention_heads, p.num_attention_heads);
  EXPECT_EQ(m.num_kv_heads, p.num_kv_heads);
  EXPECT_EQ(m.head_dim, 128);  // hidden_size / num_attention_heads
  EXPECT_EQ(m.hidden_size, p.hidden_size);
  EXPECT_EQ(m.intermediate_size, p.intermediate_size);
  EXPECT_EQ(m.vocab_size, p.vocab_size);
  EXPECT_EQ(m.max_position_embeddings, 32768);
  EXPECT_EQ(m.dtype, "bfloat16");
  EXPECT_EQ(m.sliding_window, 0);  // use_sliding_window: false
  EXPECT_FALSE(m.use_mla);
  // Estimated from shapes (with Qwen2's q/k/v biases): the published 7,615,616,512.
  EXPECT_TRUE(m.num_parameters_estimated);
  EXPECT_EQ(m.num_parameters, 7615616512.0);
  EXPECT_EQ(m.name, data("hf_qwen2.5-7b-instruct.json"));
}

TEST(ModelConfig, DeepSeekV3IsMlaMoeFp8) {
  const ModelSpec m = load_hf_config(data("hf_deepseek-v3.json"));
  EXPECT_TRUE(m.use_mla);
  EXPECT_EQ(m.kv_lora_rank, 512);
  EXPECT_EQ(m.qk_rope_head_dim, 64);
  EXPECT_EQ(m.num_layers, 61);
  EXPECT_EQ(m.head_dim, 192);  // qk_nope + qk_rope
  EXPECT_EQ(m.num_experts, 256);
  EXPECT_EQ(m.num_experts_per_tok, 8);
  EXPECT_EQ(m.checkpoint_quantization, "fp8");
  EXPECT_EQ(m.max_position_embeddings, 163840);
  EXPECT_NEAR(m.num_parameters / 1e9, 671.0, 671.0 * 0.01);
  EXPECT_NEAR(m.num_active_parameters / 1e9, 37.0, 37.0 * 0.03);
  EXPECT_EQ(page_size_bytes(m, 1, "bfloat16", 16), 16 * 576 * 2);
}

TEST(ModelConfig, Gemma2SlidingWindowAndFloat32Checkpoint) {
  const ModelSpec m = load_hf_config(data("hf_gemma-2-9b.json"));
  EXPECT_EQ(m.head_dim, 256);  // explicit head_dim wins over 3584 / 16 = 224
  EXPECT_EQ(m.sliding_window, 4096);
  EXPECT_NE(m.sliding_window_note.find("alternates"), std::string::npos);
  EXPECT_EQ(m.dtype, "bfloat16");  // vLLM serves float32 checkpoints in bfloat16
  EXPECT_TRUE(m.tie_word_embeddings);
  EXPECT_NEAR(m.num_parameters, 9241705984.0, 2.0 * 3584 * 42);
}

TEST(ModelConfig, DefaultsForMissingFields) {
  const ModelSpec m = load_hf_config(data("hf_minimal_no_head_dim.json"));
  EXPECT_EQ(m.num_kv_heads, 12);  // defaults to num_attention_heads
  EXPECT_EQ(m.head_dim, 64);      // 768 / 12
  EXPECT_EQ(m.dtype, "bfloat16");
  EXPECT_EQ(m.num_parameters, 0);  // no vocab/intermediate: not estimated
  EXPECT_FALSE(m.num_parameters_estimated);
}

TEST(ModelConfig, LayerTypesCountSlidingLayers) {
  const ModelSpec m = parse_hf_config(R"({"num_hidden_layers": 4, "num_attention_heads": 8,
    "head_dim": 64, "sliding_window": 512,
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention",
                    "sliding_attention"]})",
                                      "x.json");
  EXPECT_EQ(m.sliding_window, 512);
  EXPECT_EQ(m.sliding_window_note, "3 of 4 layers use the sliding window");
}

TEST(ModelConfig, TextConfigOfMultimodalModels) {
  const ModelSpec m = parse_hf_config(
      R"({"model_type": "llava", "torch_dtype": "float16",
          "text_config": {"num_hidden_layers": 32, "num_attention_heads": 32,
                          "num_key_value_heads": 8, "hidden_size": 4096}})",
      "mm.json");
  EXPECT_EQ(m.num_layers, 32);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.dtype, "float16");  // read from the top level
}

TEST(ModelConfigErrors, MalformedJsonNamesFileAndLine) {
  try {
    load_hf_config(data("hf_malformed.json"));
    FAIL();
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("hf_malformed.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("malformed JSON"), std::string::npos) << msg;
    EXPECT_NE(msg.find("hf_malformed.json:4: "), std::string::npos) << msg;
  }
}

TEST(ModelConfigErrors, WrongTypeNamesFileLineAndField) {
  try {
    load_hf_config(data("hf_bad_field.json"));
    FAIL();
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("hf_bad_field.json:4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'num_hidden_layers'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("\"thirty-two\""), std::string::npos) << msg;
  }
}

TEST(ModelConfigErrors, EachBadFieldIsNamed) {
  EXPECT_NE(parse_error(R"({"num_attention_heads": 8, "head_dim": 64})")
                .find("'num_hidden_layers': missing"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"num_hidden_layers": 2, "num_attention_heads": 8})").find("'head_dim'"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": -1})")
                .find("'head_dim': expected a positive integer, got -1"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 64,
                           "num_key_value_heads": 16})")
                .find("'num_key_value_heads'"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 64,
                           "torch_dtype": "int8"})")
                .find("'torch_dtype'"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 64,
                           "quantization_config": {"quant_method": "bitsandbytes"}})")
                .find("'quantization_config.quant_method'"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 64,
                           "kv_lora_rank": 512})")
                .find("'qk_rope_head_dim': missing"),
            std::string::npos);
  EXPECT_NE(parse_error("[1, 2]").find("JSON object"), std::string::npos);
  EXPECT_NE(parse_error("").find("malformed JSON"), std::string::npos);
}

TEST(ModelConfigErrors, ShapesBeyondThePlannersBoundsAreNamed) {
  EXPECT_EQ(parse_error(R"({"num_hidden_layers": 9223372036854775807, "num_attention_heads": 8,
                           "head_dim": 64})"),
            "cfg.json:1: field 'num_hidden_layers': 9223372036854775807 is out of range [1, 1024]");
  EXPECT_EQ(parse_error(R"({"num_hidden_layers": 2,
  "num_attention_heads": 8, "head_dim": 4611686018427387904})"),
            "cfg.json:2: field 'head_dim': 4611686018427387904 is out of range [1, 65536]");
  EXPECT_EQ(
      parse_error(R"({"num_hidden_layers": 2, "num_attention_heads": 100000, "head_dim": 8})"),
      "cfg.json:1: field 'num_attention_heads': 100000 is out of range [1, 65536]");
  // An unsigned beyond int64 is not silently wrapped.
  EXPECT_EQ(parse_error(R"({"num_hidden_layers": 18446744073709551615, "num_attention_heads": 8,
                           "head_dim": 64})"),
            "cfg.json:1: field 'num_hidden_layers': expected a positive integer, got "
            "18446744073709551615");
  // MLA widths whose sum used to overflow.
  EXPECT_EQ(parse_error(R"({"num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 64,
                           "kv_lora_rank": 9223372036854775807, "qk_rope_head_dim": 64})"),
            "cfg.json:2: field 'kv_lora_rank': 9223372036854775807 is out of range [1, 65536]");
  // Shapes each in range whose parameter estimate is absurd: ~1024 layers x 3 x (2^24)^2 MLP.
  EXPECT_EQ(parse_error(R"({"num_hidden_layers": 1024, "num_attention_heads": 8, "head_dim": 64,
                           "hidden_size": 16777216, "intermediate_size": 16777216,
                           "vocab_size": 1000})"),
            "cfg.json: the shapes give 8.64726e+17 parameters, more than the planner's limit of "
            "1e+15 (check hidden_size, intermediate_size, vocab_size and num_hidden_layers)");
}

TEST(ModelConfigErrors, DirectoryIsNamedAsSuch) {
  const std::string dir = data("traces");
  try {
    load_hf_config(dir);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), dir + ": is a directory, not a config.json file");
  }
}

TEST(ModelConfigErrors, MissingFile) {
  try {
    load_hf_config(data("does-not-exist.json"));
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos);
  }
}

// The hybrid families: the config's layer pattern is the one vLLM's model code builds, and the
// KV shape is the preset's (so `plan --config` and `plan --model` agree).
void expect_same_kv_layout(const ModelSpec& config, const ModelSpec& preset) {
  EXPECT_EQ(config.num_layers, preset.num_layers);
  EXPECT_EQ(config.num_kv_heads, preset.num_kv_heads);
  EXPECT_EQ(config.head_dim, preset.head_dim);
  EXPECT_EQ(config.sliding_window, preset.sliding_window);
  EXPECT_EQ(config.attention_chunk_size, preset.attention_chunk_size);
  EXPECT_EQ(config.layer_types, preset.layer_types);
  EXPECT_EQ(config.max_position_embeddings, preset.max_position_embeddings);
}

TEST(ModelConfig, GptOssAlternatesSlidingAndFullLayers) {
  const ModelSpec m = load_hf_config(data("hf_gpt-oss-20b.json"));
  expect_same_kv_layout(m, find_model_preset("gpt-oss-20b"));
  EXPECT_EQ(m.layer_types.front(), KVCacheSpecKind::kSlidingWindow);  // layer 0 slides
  EXPECT_EQ(count_layers(m, KVCacheSpecKind::kSlidingWindow), 12);
  EXPECT_EQ(m.checkpoint_quantization, "mxfp4");
  EXPECT_EQ(m.num_experts, 32);
}

TEST(ModelConfig, Gemma3DerivesLayerTypesFromThePattern) {
  const ModelSpec m = load_hf_config(data("hf_gemma-3-12b.json"));  // no layer_types listed
  expect_same_kv_layout(m, find_model_preset("gemma-3-12b"));
  EXPECT_EQ(count_layers(m, KVCacheSpecKind::kFullAttention), 8);  // layers 5, 11, ..., 47
  EXPECT_EQ(layer_type(m, 5), KVCacheSpecKind::kFullAttention);
  EXPECT_EQ(layer_type(m, 6), KVCacheSpecKind::kSlidingWindow);
}

TEST(ModelConfig, Llama4ChunkedLocalAttentionFromNoRopeLayers) {
  // An empty no_rope_layers means a NoPE (full) layer every 4th layer (transformers' default).
  const ModelSpec m = load_hf_config(data("hf_llama-4-scout.json"));
  expect_same_kv_layout(m, find_model_preset("llama-4-scout"));
  EXPECT_EQ(count_layers(m, KVCacheSpecKind::kChunkedLocalAttention), 36);
  const ModelSpec explicit_list = parse_hf_config(
      R"({"num_hidden_layers": 4, "num_attention_heads": 8, "head_dim": 64,
      "attention_chunk_size": 256, "no_rope_layers": [0, 1, 1, 0]})",
      "x.json");
  EXPECT_EQ(explicit_list.layer_types,
            (std::vector<KVCacheSpecKind>{
                KVCacheSpecKind::kFullAttention, KVCacheSpecKind::kChunkedLocalAttention,
                KVCacheSpecKind::kChunkedLocalAttention, KVCacheSpecKind::kFullAttention}));
}

TEST(ModelConfig, HybridLayoutErrorsNameTheField) {
  EXPECT_NE(parse_error(R"({"num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 64,
      "sliding_window": 8, "layer_types": ["sliding_attention"]})")
                .find("'layer_types'"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 64,
      "sliding_window": 8, "layer_types": ["sliding_attention", "linear_attention"]})")
                .find("linear_attention"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 64,
      "attention_chunk_size": 8, "no_rope_layers": [1]})")
                .find("'no_rope_layers'"),
            std::string::npos);
}

TEST(ModelConfig, HybridPlanFromConfigEqualsThePresetPlan) {
  PlanInputs in;
  in.gpu = find_gpu_preset("h100-80g");
  in.kv_cache_memory_bytes = int64_t{10} << 30;
  in.max_model_len = 32768;
  in.model = load_hf_config(data("hf_gpt-oss-20b.json"));
  const Plan from_config = compute_plan(in);
  in.model = find_model_preset("gpt-oss-20b");
  const Plan from_preset = compute_plan(in);
  EXPECT_EQ(from_config.num_gpu_blocks, from_preset.num_gpu_blocks);
  EXPECT_EQ(vllm_kv_cache_report_lines(from_config), vllm_kv_cache_report_lines(from_preset));
  EXPECT_EQ(vllm_kv_cache_report_lines(from_config).back(),
            "GPU KV cache size: 290,413 tokens, Maximum concurrency for 32,768 tokens per "
            "request: 8.86x");  // vLLM 0.33.0 (0.26.0: the same numbers on two lines)
}

}  // namespace
}  // namespace kvsim
