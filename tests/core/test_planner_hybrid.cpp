// kvsim's plan of hybrid (sliding-window, chunked-local) and full-attention models against vLLM's
// own sizing, per release: tests/data/vllm_plan_goldens/<release>/*.json (0.26/, 0.33/; a flat
// file directly under vllm_plan_goldens/ is read as well, with the release it names), recorded by
// tools/vllm_conformance/plan_record.py from get_kv_cache_configs() with the same budget,
// max_model_len, batch, async setting, hybrid-manager setting, block size and KV dtype. Every
// golden is planned with the release it records ("vllm_version") and compared field by field:
// the groups (kind, window, layers in vLLM's order), num_blocks, the tensors and who shares them
// (0.26's tensor layout), each group's reservation, max concurrency and the start-up report
// byte for byte (0.26: two lines, 0.33: one); a golden that records vLLM's start-up error must
// be a DoesNotFitError carrying that text.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvsim/core/kv_cache_spec.h"
#include "kvsim/core/model_presets.h"
#include "kvsim/core/planner.h"

namespace kvsim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kGoldens = fs::path(KVSIM_SOURCE_DIR) / "tests/data/vllm_plan_goldens";

// Every golden: <release>/*.json and any flat *.json (the layout before per-release folders).
std::vector<fs::path> golden_files() {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(kGoldens)) {
    if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

json read_json(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

// The golden's inputs as kvsim's planner takes them: the budget through --kv-cache-memory-bytes
// (vLLM's kv_cache_memory_bytes), the card only for its name.
PlanInputs inputs_of(const json& g) {
  const json& i = g.at("inputs");
  PlanInputs in;
  const std::string release = g.at("vllm_version").get<std::string>();
  const std::optional<VllmVersion> v = parse_vllm_version(release);
  if (!v) throw std::invalid_argument("golden of an unknown vLLM release " + release);
  in.vllm_version = *v;
  in.model = find_model_preset(i.at("model").get<std::string>());
  in.gpu.name = "golden";
  in.gpu.vram_gib = 1000;
  in.kv_cache_memory_bytes = i.at("kv_cache_memory_bytes").get<int64_t>();
  in.max_model_len = i.at("max_model_len").get<int64_t>();
  if (i.at("max_num_batched_tokens").is_null()) {
    // vLLM's default for the card the recorder named (get_batch_defaults): kvsim derives it
    // from the card's memory and name.
    in.gpu.name = i.at("gpu_name").get<std::string>();
    in.gpu.vram_gib = static_cast<double>(i.at("gpu_memory_bytes").get<int64_t>()) / kGiB;
  } else {
    in.max_num_batched_tokens = i.at("max_num_batched_tokens").get<int64_t>();
  }
  in.async_scheduling = i.at("async_scheduling").get<bool>();
  if (!i.at("disable_hybrid_kv_cache_manager").is_null()) {
    in.disable_hybrid_kv_cache_manager = i.at("disable_hybrid_kv_cache_manager").get<bool>();
  }
  in.block_size = i.at("block_size").get<int64_t>();
  in.kv_cache_dtype = i.at("kv_cache_dtype").get<std::string>();
  if (!i.at("num_gpu_blocks_override").is_null()) {
    in.num_gpu_blocks_override = i.at("num_gpu_blocks_override").get<int64_t>();
  }
  return in;
}

// The text of vLLM's start-up error a golden records (a string, or an object with "message"),
// empty when vLLM started.
std::string recorded_error(const json& g) {
  if (!g.contains("error") || g.at("error").is_null()) return {};
  const json& e = g.at("error");
  return e.is_string() ? e.get<std::string>() : e.at("message").get<std::string>();
}

TEST(PlannerHybridGoldens, EveryGoldenMatchesVllm) {
  const std::vector<fs::path> files = golden_files();
  ASSERT_GE(files.size(), 15u) << "goldens missing under " << kGoldens;
  std::map<VllmVersion, int> per_release;
  for (const fs::path& path : files) {
    SCOPED_TRACE(fs::relative(path, kGoldens).string());
    const json g = read_json(path);
    const PlanInputs in = inputs_of(g);
    ++per_release[in.vllm_version];
    const std::string error = recorded_error(g);
    if (!error.empty()) {
      try {
        compute_plan(in);
        ADD_FAILURE() << "vLLM refused to start: " << error;
      } catch (const DoesNotFitError& e) {
        EXPECT_EQ(e.vllm_error(), error) << e.what();
      }
      continue;
    }
    const Plan p = compute_plan(in);
    const KVCacheConfig& c = p.kv_cache_config;
    validate_kv_cache_config(c);

    EXPECT_EQ(p.max_in_flight_tokens, g.at("max_in_flight_tokens").get<int64_t>());
    if (g.contains("max_num_batched_tokens")) {
      EXPECT_EQ(p.max_num_batched_tokens, g.at("max_num_batched_tokens").get<int64_t>());
    }
    EXPECT_EQ(!p.hybrid_kv_cache_manager && p.hybrid_model,
              g.at("hybrid_kv_cache_manager_disabled").get<bool>() && p.hybrid_model);
    EXPECT_EQ(p.num_gpu_blocks, g.at("num_blocks").get<int64_t>());
    EXPECT_EQ(c.num_blocks, g.at("num_blocks").get<int64_t>());

    const json& groups = g.at("kv_cache_groups");
    ASSERT_EQ(c.kv_cache_groups.size(), groups.size());
    ASSERT_EQ(p.kv_cache_groups.size(), groups.size());
    for (size_t k = 0; k < groups.size(); ++k) {
      SCOPED_TRACE("group " + std::to_string(k));
      const json& want = groups[k];
      const KVCacheGroupSpec& got = c.kv_cache_groups[k];
      EXPECT_EQ(std::string(to_string(got.kv_cache_spec.kind)), want.at("kind").get<std::string>());
      EXPECT_EQ(got.layer_indices, want.at("layer_indices").get<std::vector<int32_t>>());
      EXPECT_EQ(got.kv_cache_spec.block_size, want.at("block_size").get<int32_t>());
      EXPECT_EQ(got.kv_cache_spec.page_size_bytes, want.at("page_size_bytes").get<int64_t>());
      if (got.kv_cache_spec.kind == KVCacheSpecKind::kSlidingWindow) {
        EXPECT_EQ(got.kv_cache_spec.sliding_window, want.at("sliding_window").get<int32_t>());
      }
      if (got.kv_cache_spec.kind == KVCacheSpecKind::kChunkedLocalAttention) {
        EXPECT_EQ(got.kv_cache_spec.attention_chunk_size,
                  want.at("attention_chunk_size").get<int32_t>());
      }
      EXPECT_EQ(p.kv_cache_groups[k].max_memory_usage_bytes,
                want.at("max_memory_usage_bytes").get<int64_t>());
      if (want.contains("max_admission_blocks_per_request")) {
        EXPECT_EQ(p.kv_cache_groups[k].blocks_per_request,
                  want.at("max_admission_blocks_per_request").get<int64_t>());
      }
    }

    // 0.26's layout: group_size tensors, tensor i shared by the i-th layer of every group, as
    // kvsim's KVCacheConfig holds them. 0.33 records one tensor per group (KVCacheTensor.layers,
    // kv_cache_planning.py:642-741, layer-outer LBNHC): the whole pool of bytes_per_block x
    // num_blocks aliased by every group, layer_stride page x num_blocks, block_stride page; kvsim
    // keeps 0.26's shape (the same blocks and bytes), so those are checked against the plan.
    const json& tensors = g.at("kv_cache_tensors");
    if (!tensors.empty() && tensors[0].contains("shared_by")) {
      ASSERT_EQ(c.kv_cache_tensors.size(), tensors.size());
      for (size_t t = 0; t < tensors.size(); ++t) {
        EXPECT_EQ(c.kv_cache_tensors[t].size_bytes, tensors[t].at("size_bytes").get<int64_t>());
        EXPECT_EQ(c.kv_cache_tensors[t].shared_by,
                  tensors[t].at("shared_by").get<std::vector<int32_t>>());
      }
    } else {
      ASSERT_EQ(tensors.size(), c.kv_cache_groups.size());
      for (size_t t = 0; t < tensors.size(); ++t) {
        EXPECT_EQ(tensors[t].at("size_bytes").get<int64_t>(), p.bytes_per_block * p.num_gpu_blocks);
        EXPECT_EQ(tensors[t].at("layers").get<std::vector<int32_t>>(),
                  c.kv_cache_groups[t].layer_indices);
        EXPECT_EQ(tensors[t].at("layer_stride").get<int64_t>(),
                  p.page_size_bytes * p.num_gpu_blocks);
        EXPECT_EQ(tensors[t].at("block_stride").get<int64_t>(), p.page_size_bytes);
        EXPECT_EQ(tensors[t].at("offset").get<int64_t>(), 0);
      }
    }

    EXPECT_DOUBLE_EQ(p.vllm_max_concurrency, g.at("max_concurrency").get<double>());
    EXPECT_EQ(vllm_kv_cache_report_lines(p), g.at("log_lines").get<std::vector<std::string>>());
    EXPECT_EQ(vllm_kv_cache_report_lines(p).size(),
              vllm_behavior(in.vllm_version).one_line_kv_cache_report ? 1u : 2u);
  }
  // Every release's folder has its goldens (0.33's once recorded: tests/data/vllm_plan_goldens).
  EXPECT_GE(per_release[VllmVersion::kV0_26], 15);
  if (fs::exists(kGoldens / "0.33")) {
    EXPECT_GE(per_release[VllmVersion::kV0_33], 15);
  }
}

// The goldens cover every hybrid family and both manager settings.
TEST(PlannerHybridGoldens, CoverTheFamilies) {
  int sliding = 0, chunked = 0, disabled = 0, padded = 0;
  for (const fs::path& path : golden_files()) {
    const json g = read_json(path);
    if (!recorded_error(g).empty()) continue;
    const Plan p = compute_plan(inputs_of(g));
    for (const PlanKVCacheGroup& k : p.kv_cache_groups) {
      sliding += k.kind == KVCacheSpecKind::kSlidingWindow;
      chunked += k.kind == KVCacheSpecKind::kChunkedLocalAttention;
      padded += k.num_padding_layers > 0;
    }
    disabled += p.hybrid_model && !p.hybrid_kv_cache_manager;
  }
  EXPECT_GT(sliding, 0);
  EXPECT_GT(chunked, 0);
  EXPECT_GT(disabled, 0);
  EXPECT_GT(padded, 0);  // gemma-3-27b: 52 sliding layers in 6 groups of 10 slots
}

// gpt-oss-20b, worked by hand (docs/hybrid-kv.md): 12 sliding (W = 128) + 12 full layers, 8 KV
// heads x 64 dims in bf16, so page = 2 x 16 x 8 x 64 x 2 = 32 KiB per layer and block. With
// async scheduling and max_num_batched_tokens 8192, 16,384 tokens are in flight: a sliding
// layer reserves cdiv(min(127 + 16384, 32768), 16) + 1 = 1,033 blocks per request, a full one
// cdiv(32768, 16) = 2,048. 10 GiB / 32 KiB / 12 = 27,306 blocks; 27306 / 3081 = 8.86x.
TEST(PlannerHybrid, GptOss20bWorkedExample) {
  PlanInputs in;
  in.model = find_model_preset("gpt-oss-20b");
  in.gpu.name = "h100-80g";
  in.gpu.vram_gib = 80;
  in.kv_cache_memory_bytes = int64_t{10} << 30;
  in.max_model_len = 32768;
  const Plan p = compute_plan(in);
  EXPECT_EQ(p.max_num_batched_tokens, 8192);  // vLLM's default on an 80 GiB card
  EXPECT_EQ(p.max_in_flight_tokens, 16384);
  EXPECT_EQ(p.page_size_bytes, 32768);
  EXPECT_EQ(p.kv_cache_group_size, 12);
  ASSERT_EQ(p.kv_cache_groups.size(), 2u);
  EXPECT_EQ(p.kv_cache_groups[0].kind, KVCacheSpecKind::kSlidingWindow);
  EXPECT_EQ(p.kv_cache_groups[0].blocks_per_request, 1033);
  EXPECT_EQ(p.kv_cache_groups[1].blocks_per_request, 2048);
  EXPECT_EQ(p.blocks_per_request, 3081);
  EXPECT_EQ(p.num_gpu_blocks, 27306);
  EXPECT_EQ(vllm_kv_cache_report_lines(p),
            (std::vector<std::string>{"GPU KV cache size: 290,413 tokens, Maximum concurrency for "
                                      "32,768 tokens per request: 8.86x"}));
  // The lesson's kappa x S counts all 24 layers for every token: 10 / 1.5 GiB = 6 sequences.
  EXPECT_EQ(p.kappa_bytes, 24 * 2048);
  EXPECT_EQ(p.max_concurrency, 6);
  // Hybrid form: kappa_full 24 KiB/token grows with S, the window part stops at 16,511 tokens.
  EXPECT_EQ(p.kappa_full_bytes, 12 * 2048);
  EXPECT_EQ(p.kappa_windowed_bytes, 12 * 2048);
  EXPECT_EQ(p.windowed_tokens_cap, 127 + 16384);
  EXPECT_EQ(p.hybrid_max_concurrency, 8);
}

// vLLM's rule: the hybrid manager is off by default for chunked local attention and then every
// layer is sized as full attention, which gives exactly the full-attention plan.
TEST(PlannerHybrid, DisabledManagerEqualsFullAttention) {
  PlanInputs in;
  in.model = find_model_preset("llama-4-scout");
  in.gpu.name = "x";
  in.gpu.vram_gib = 80;
  in.kv_cache_memory_bytes = int64_t{40} << 30;
  in.max_model_len = 131072;
  const Plan hybrid_off = compute_plan(in);
  EXPECT_TRUE(hybrid_off.hybrid_model);
  EXPECT_FALSE(hybrid_off.hybrid_kv_cache_manager);
  ModelSpec full = in.model;
  full.layer_types.clear();
  full.attention_chunk_size = 0;
  in.model = full;
  const Plan plain = compute_plan(in);
  EXPECT_EQ(hybrid_off.num_gpu_blocks, plain.num_gpu_blocks);
  EXPECT_EQ(vllm_kv_cache_report_lines(hybrid_off), vllm_kv_cache_report_lines(plain));
}

// Sync scheduling halves the in-flight tokens, so the window groups reserve less and more
// requests fit (the reservation, not the steady state, sizes vLLM's concurrency).
TEST(PlannerHybrid, AsyncSchedulingDoublesTheWindowReservation) {
  PlanInputs in;
  in.model = find_model_preset("gpt-oss-20b");
  in.gpu.name = "x";
  in.gpu.vram_gib = 80;
  in.kv_cache_memory_bytes = int64_t{10} << 30;
  in.max_model_len = 32768;
  in.max_num_batched_tokens = 8192;
  const Plan async_plan = compute_plan(in);
  in.async_scheduling = false;
  const Plan sync_plan = compute_plan(in);
  EXPECT_EQ(async_plan.kv_cache_groups[0].tokens_per_request, 127 + 16384);
  EXPECT_EQ(sync_plan.kv_cache_groups[0].tokens_per_request, 127 + 8192);
  EXPECT_GT(sync_plan.vllm_max_concurrency, async_plan.vllm_max_concurrency);
}

TEST(PlannerHybrid, DefaultBatchFollowsTheCard) {
  GpuSpec a100{"a100-80g", 80, 312, 2039};
  GpuSpec h100{"h100-80g", 80, 989.4, 3350};
  GpuSpec l4{"l4", 24, 121, 300};
  for (VllmVersion v : {VllmVersion::kV0_26, VllmVersion::kV0_33}) {
    SCOPED_TRACE(std::string(to_string(v)));
    EXPECT_EQ(vllm_default_max_num_batched_tokens(h100, 32768, std::nullopt, v), 8192);
    EXPECT_EQ(vllm_default_max_num_batched_tokens(a100, 32768, std::nullopt, v), 2048);
    EXPECT_EQ(vllm_default_max_num_batched_tokens(l4, 32768, std::nullopt, v), 2048);
    EXPECT_EQ(vllm_default_max_num_batched_tokens(l4, 4, 100, v), 400);  // min(seqs x L, 2048)
    EXPECT_EQ(
        vllm_default_max_num_batched_tokens(find_gpu_preset("h200-141g"), 32768, std::nullopt, v),
        8192);  // 141 GiB: below 0.33's large tier
  }
  // vLLM 0.33 get_batch_defaults: >= 160 GiB (any name) gets 16384 tokens and 1024 sequences.
  const GpuSpec b200 = find_gpu_preset("b200");  // 180 GiB
  GpuSpec a100_160{"a100-160g", 160, 312, 2039};
  EXPECT_EQ(vllm_default_max_num_batched_tokens(b200, 32768, std::nullopt, VllmVersion::kV0_26),
            8192);
  EXPECT_EQ(vllm_default_max_num_batched_tokens(b200, 32768, std::nullopt, VllmVersion::kV0_33),
            16384);
  EXPECT_EQ(vllm_default_max_num_batched_tokens(a100_160, 32768, std::nullopt, VllmVersion::kV0_26),
            2048);
  EXPECT_EQ(vllm_default_max_num_batched_tokens(a100_160, 32768, std::nullopt, VllmVersion::kV0_33),
            16384);
  // min(1024 x 8, 16384): the default max_num_seqs of the tier is 1024.
  EXPECT_EQ(vllm_default_max_num_batched_tokens(b200, 8, std::nullopt, VllmVersion::kV0_33), 8192);
}

// The large-card tier moves a hybrid model's window reservation (and so vLLM's report), never
// num_gpu_blocks: gpt-oss-20b on a B200 reserves 127 + 2 x 16384 tokens per window layer.
TEST(PlannerHybrid, LargeCardTierUnder033) {
  PlanInputs in;
  in.model = find_model_preset("gpt-oss-20b");
  in.gpu = find_gpu_preset("b200");
  in.kv_cache_memory_bytes = int64_t{10} << 30;
  in.max_model_len = 65536;
  in.vllm_version = VllmVersion::kV0_26;
  const Plan old_plan = compute_plan(in);
  in.vllm_version = VllmVersion::kV0_33;
  const Plan new_plan = compute_plan(in);
  EXPECT_EQ(old_plan.max_num_batched_tokens, 8192);
  EXPECT_EQ(new_plan.max_num_batched_tokens, 16384);
  EXPECT_EQ(new_plan.max_in_flight_tokens, 32768);
  EXPECT_EQ(old_plan.num_gpu_blocks, new_plan.num_gpu_blocks);
  EXPECT_EQ(old_plan.kv_cache_groups[0].tokens_per_request, 127 + 16384);
  EXPECT_EQ(new_plan.kv_cache_groups[0].tokens_per_request, 127 + 32768);
  // 27306 blocks / (cdiv(32895, 16) + 1 + 4096) = 27306 / 6153 = 4.44x; 0.26: / 5129 = 5.32x.
  EXPECT_EQ(new_plan.blocks_per_request, 2056 + 1 + 4096);
  EXPECT_EQ(vllm_kv_cache_report_lines(new_plan).at(0),
            "GPU KV cache size: 290,837 tokens, Maximum concurrency for 65,536 tokens per "
            "request: 4.44x");
  EXPECT_EQ(vllm_kv_cache_report_lines(old_plan).at(1),
            "Maximum concurrency for 65,536 tokens per request: 5.32x");
  // An explicit --max-num-batched-tokens is the same in both releases.
  in.max_num_batched_tokens = 8192;
  EXPECT_EQ(compute_plan(in).vllm_max_concurrency, old_plan.vllm_max_concurrency);
}

TEST(PlannerHybrid, SlidingWindowNeedsKernelBlockMultiples) {
  PlanInputs in;
  in.model = find_model_preset("gpt-oss-20b");
  in.gpu.name = "x";
  in.gpu.vram_gib = 80;
  in.kv_cache_memory_bytes = int64_t{10} << 30;
  in.max_model_len = 4096;
  in.block_size = 8;
  EXPECT_THROW(compute_plan(in), PlanError);
  in.disable_hybrid_kv_cache_manager = true;  // all full attention: any block size
  EXPECT_NO_THROW(compute_plan(in));
}

// The inverse question for N streams: vLLM's blocks give the largest S with
// N x (cdiv(min(16511, S), 16) + 1 + cdiv(S, 16)) <= N_blocks - 1, the lesson's hybrid form
// solves kappa_full x S + kappa_windowed x cap = K / N.
TEST(PlannerHybrid, LongestContextForNStreams) {
  PlanInputs in;
  in.model = find_model_preset("gpt-oss-20b");
  in.gpu.name = "h100-80g";
  in.gpu.vram_gib = 80;
  in.kv_cache_memory_bytes = int64_t{10} << 30;
  in.max_model_len = 32768;
  in.concurrency = 8;
  const Plan p = compute_plan(in);
  // 27305 / 8 = 3413 blocks per stream: 1033 for the window, 2380 x 16 = 38080 tokens full.
  ASSERT_TRUE(p.vllm_max_context_tokens.has_value());
  EXPECT_EQ(*p.vllm_max_context_tokens, 38080);
  // (10 GiB / 8 - 24576 x 16511) / 24576 = 38102.3
  ASSERT_TRUE(p.hybrid_max_context_tokens.has_value());
  EXPECT_EQ(*p.hybrid_max_context_tokens, 38102);
  // The full-attention lesson: 10 GiB / (49152 x 8) = 27306 tokens.
  EXPECT_EQ(*p.max_context_tokens, 27306);
}

}  // namespace
}  // namespace kvsim

namespace kvsim {
namespace {

// A pool too small for one max_model_len request: the error names the longest max_model_len that
// fits with every group counted (vLLM's estimate_max_model_len), not blocks x block_size.
TEST(PlannerHybrid, DoesNotFitNamesTheLongestHybridMaxModelLen) {
  PlanInputs in;
  in.model = find_model_preset("gpt-oss-20b");
  in.gpu = find_gpu_preset("h100-80g");
  in.num_gpu_blocks_override = 384;
  // Full group cdiv(S, 16) blocks + window group cdiv(min(127 + 2 * 8192, S), 16) + 1 <= 384
  // (0.26), <= 383 (0.33, the null block held back): 2 x 191 + 1 = 383 either way.
  for (VllmVersion v : {VllmVersion::kV0_26, VllmVersion::kV0_33}) {
    SCOPED_TRACE(std::string(to_string(v)));
    in.vllm_version = v;
    in.max_model_len = 4096;
    try {
      compute_plan(in);
      FAIL() << "4096 tokens fit in 384 blocks of two groups";
    } catch (const DoesNotFitError& e) {
      EXPECT_NE(std::string(e.what()).find("513 blocks of 16 tokens"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("the longest max_model_len that fits is 3056"),
                std::string::npos)
          << e.what();
      EXPECT_NE(e.vllm_error().find("the estimated maximum model length is 3056. "),
                std::string::npos)
          << e.vllm_error();
    }
    in.max_model_len = 3056;
    EXPECT_NO_THROW(compute_plan(in));
    in.max_model_len = 3057;
    EXPECT_THROW(compute_plan(in), DoesNotFitError);
  }
}

}  // namespace
}  // namespace kvsim
