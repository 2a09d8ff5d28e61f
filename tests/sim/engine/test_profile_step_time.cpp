// ProfileStepTime (`--step-time profile:DIR`): interpolation in tokens and all-reduce size
// against hand-written tables, TP selection and refusal, the shape check, strict CSV errors, and
// a replay on the shipped H100 Llama-2-7b profile checked against values read from the table, and
// the shipped H200 profiles against physical bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "kvsim/core/kv_backend.h"
#include "kvsim/core/model_presets.h"
#include "kvsim/core/param.h"
#include "kvsim/sim/engine/profile_step_time.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/io/model_config.h"
#include "kvsim/sim/traces/trace.h"

#include "step_work_fixture.h"

namespace kvsim {
namespace {

namespace fs = std::filesystem;

const std::string kH100Llama2 =
    kSource + "/calibration/vidur/compute/h100/meta-llama/Llama-2-7b-hf";

// A fresh directory per test, removed at the end.
class ProfileDir {
 public:
  ProfileDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            (std::string("kvsim_profile_") + info->test_suite_name() + "_" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ProfileDir() { fs::remove_all(path_); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = (path_ / name).string();
    std::ofstream(p) << text;
    return p;
  }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

// mlp.csv in Vidur's column layout. Each row: (tokens, tp, per-op median ms); every op of the
// row gets the same median, so one layer = 9 x that value (emb gets 100 ms, which must be
// ignored).
std::string mlp_csv(const std::vector<std::tuple<int, int, double>>& rows, int n_head = 4,
                    int n_kv = 2, int n_embd = 8, int n_exp = 16) {
  std::ostringstream s;
  const std::vector<std::string> ops = {
      "emb",         "input_layernorm", "attn_pre_proj",
      "attn_rope",   "attn_post_proj",  "post_attention_layernorm",
      "mlp_up_proj", "mlp_act",         "mlp_down_proj",
      "add"};
  for (const auto& op : ops) {
    for (const char* stat : {"min", "max", "mean", "median", "std"}) {
      s << "time_stats." << op << "." << stat << ",";
    }
  }
  s << "n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp,num_tokens,"
       "num_tensor_parallel_workers\n";
  for (const auto& [tokens, tp, ms] : rows) {
    for (const auto& op : ops) {
      const double m = op == "emb" ? 100.0 : ms;
      s << m * 0.9 << "," << m * 2 << "," << m * 1.1 << "," << m << ",0.01,";
    }
    s << n_head << "," << n_kv << "," << n_embd << "," << n_exp << ",64,True," << tokens << ","
      << tp << "\n";
  }
  return s.str();
}

ProfileModelShape tiny_profile_shape() {
  ProfileModelShape s;
  s.name = "tiny";
  s.num_layers = 2;
  s.num_attention_heads = 4;
  s.num_kv_heads = 2;
  s.head_dim = 2;
  s.hidden_size = 8;
  s.intermediate_size = 16;
  s.kv_bytes_per_token_per_rank = 32;
  return s;
}

const RooflineGpu kGpu{"g", 1e12, 1e11};

TEST(ProfileTables, InterpolatesExactlyAtAndBetweenPoints) {
  const PiecewiseLinear f({{1, 2.0}, {4, 5.0}, {8, 13.0}, {16, 29.0}, {4, 7.0}});
  EXPECT_EQ(f.xs(), (std::vector<double>{1, 4, 8, 16}));
  EXPECT_DOUBLE_EQ(f(1), 2.0);
  EXPECT_DOUBLE_EQ(f(4), 6.0);  // two measurements of x = 4, averaged
  EXPECT_DOUBLE_EQ(f(8), 13.0);
  EXPECT_DOUBLE_EQ(f(16), 29.0);
  EXPECT_DOUBLE_EQ(f(2), 2.0 + (6.0 - 2.0) / 3.0);
  EXPECT_DOUBLE_EQ(f(6), 6.0 + (13.0 - 6.0) / 2.0);
  EXPECT_DOUBLE_EQ(f(0.5), 2.0);  // below the first point: the first value
  // Beyond the last: the secant from x = 8 (the largest at or below 16 / 2) to 16, slope 2.
  EXPECT_DOUBLE_EQ(f(20), 29.0 + 2.0 * 4);
  // A falling tail (noise) is extrapolated flat, never downwards.
  const PiecewiseLinear g({{1, 5.0}, {2, 3.0}});
  EXPECT_DOUBLE_EQ(g(10), 3.0);
  EXPECT_THROW(PiecewiseLinear({}), std::invalid_argument);
  EXPECT_THROW(PiecewiseLinear({{1, -1.0}}), std::invalid_argument);
}

TEST(ProfileStepTime, LayerTimeIsTheTableInterpolatedInTokens) {
  ProfileDir dir;
  dir.write(
      "mlp.csv",
      mlp_csv({{1, 1, 0.1}, {8, 1, 0.2}, {16, 1, 0.4}, {1, 2, 0.05}, {8, 2, 0.1}, {16, 2, 0.3}}));
  const OperatorProfile ops = read_operator_profile(dir.str() + "/mlp.csv");
  EXPECT_EQ(ops.max_tokens, 16);
  EXPECT_EQ(ops.n_head, 4);
  ASSERT_EQ(ops.layer_ms.size(), 2u);
  const ProfileStepTime m(tiny_profile_shape(), kGpu, 1, ops, std::nullopt,
                          ProfileParams{0.0, {}, {}});
  const double L = 2;
  for (const auto& [tokens, per_op_ms] :
       std::vector<std::pair<int, double>>{{1, 0.1}, {8, 0.2}, {16, 0.4}}) {
    EXPECT_DOUBLE_EQ(m.terms(decode_batch(tokens, 0)).layers, L * 9 * per_op_ms * 1e-3) << tokens;
  }
  // 4 tokens: 3/7 of the way from 1 to 8.
  EXPECT_DOUBLE_EQ(m.terms(decode_batch(4, 0)).layers, L * 9 * (0.1 + 3.0 / 7.0 * 0.1) * 1e-3);
  // 24 tokens: beyond 16, along the secant from 8 to 16 (0.025 ms per token per op).
  EXPECT_DOUBLE_EQ(m.terms(decode_batch(24, 0)).layers, L * 9 * (0.4 + 8 * 0.025) * 1e-3);
  // TP 2 uses its own rows.
  ProfileDir ar;
  ar.write("all_reduce.csv",
           ",time_stats.all_reduce.median,num_workers,size,collective,devices_per_node\n"
           "0,0.01,2,16,all_reduce,2\n0,0.03,2,256,all_reduce,2\n0,9.0,2,256,all_reduce,1\n"
           "0,9.0,2,256,all_gather,2\n");
  const AllReduceProfile net = read_all_reduce_profile(ar.str() + "/all_reduce.csv");
  const ProfileStepTime m2(tiny_profile_shape(), kGpu, 2, ops, net, ProfileParams{0.0, {}, {}});
  const ProfileStepTime::Terms t = m2.terms(decode_batch(8, 0));
  EXPECT_DOUBLE_EQ(t.layers, L * 9 * 0.1 * 1e-3);
  // 8 tokens x 8 hidden x 2 bytes = 128 bytes: (128 - 16) / (256 - 16) of the way; the
  // multi-node (devices_per_node 1) and all_gather rows are skipped.
  const double ar_ms = 0.01 + (128.0 - 16.0) / 240.0 * 0.02;
  EXPECT_DOUBLE_EQ(t.all_reduce, 2 * L * ar_ms * 1e-3);
}

TEST(ProfileStepTime, AttentionAndOverheadFollowTheFormula) {
  ProfileDir dir;
  dir.write("mlp.csv", mlp_csv({{1, 1, 0.1}, {64, 1, 0.1}}));
  const OperatorProfile ops = read_operator_profile(dir.str() + "/mlp.csv");
  ProfileParams p;
  p.overhead_ms = 2.0;
  p.attn_mfu = 0.5;
  p.attn_mbu = 0.25;
  const ProfileStepTime m(tiny_profile_shape(), kGpu, 1, ops, std::nullopt, p);
  StepWork w;
  w.add_sequence(3, 4, true);
  w.add_sequence(10, 1, false);
  const ProfileStepTime::Terms t = m.terms(w);
  const double pairs = 3 * 4 + 10 * 1 + 0.5 * (16 + 1);
  EXPECT_DOUBLE_EQ(t.attn_compute, 4.0 * 2 * 4 * 2 * pairs / (1e12 * 0.5));
  EXPECT_DOUBLE_EQ(t.attn_kv, 32.0 * (13 + 5) / (1e11 * 0.25));
  EXPECT_EQ(t.all_reduce, 0.0);
  const StepTimeBreakdown b = m.estimate(w);
  EXPECT_DOUBLE_EQ(b.total_s, t.layers + t.attn_compute + t.attn_kv + 2e-3);
  EXPECT_EQ(m.estimate(StepWork{}).total_s, 0.0);
  EXPECT_NE(m.describe().find("mlp.csv"), std::string::npos);
  // Card defaults when not given.
  const ProfileStepTime h(tiny_profile_shape(), RooflineGpu{"h100-80g", 1e12, 1e11}, 1, ops,
                          std::nullopt);
  EXPECT_DOUBLE_EQ(h.attention_efficiency().mfu, default_attention_efficiency("h100-80g").mfu);
}

TEST(ProfileStepTime, RefusesATpTheTableLacks) {
  ProfileDir dir;
  dir.write("mlp.csv", mlp_csv({{1, 1, 0.1}, {1, 2, 0.1}, {1, 8, 0.1}}));
  const OperatorProfile ops = read_operator_profile(dir.str() + "/mlp.csv");
  try {
    ProfileStepTime(tiny_profile_shape(), kGpu, 4, ops, std::nullopt);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no rows for tensor parallel size 4"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("profiled: 1, 2, 8"), std::string::npos) << e.what();
  }
  // TP 2 without an all-reduce table, and with one lacking num_workers 2.
  EXPECT_THROW(ProfileStepTime(tiny_profile_shape(), kGpu, 2, ops, std::nullopt),
               std::invalid_argument);
  dir.write("all_reduce.csv", "time_stats.all_reduce.median,num_workers,size\n0.1,8,1024\n");
  const AllReduceProfile net = read_all_reduce_profile(dir.str() + "/all_reduce.csv");
  try {
    ProfileStepTime(tiny_profile_shape(), kGpu, 2, ops, net);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("num_workers 2 (profiled: 8)"), std::string::npos)
        << e.what();
  }
}

TEST(ProfileStepTime, RefusesAnotherModelsTable) {
  ProfileDir dir;
  dir.write("mlp.csv", mlp_csv({{1, 1, 0.1}}, 4, 2, 8, 16));
  const OperatorProfile ops = read_operator_profile(dir.str() + "/mlp.csv");
  ProfileModelShape other = tiny_profile_shape();
  other.name = "other";
  other.intermediate_size = 32;
  try {
    ProfileStepTime(other, kGpu, 1, ops, std::nullopt);
    FAIL();
  } catch (const std::invalid_argument& e) {
    const std::string msg = spell_params(e.what(), ParamSpelling::kCli);
    EXPECT_NE(msg.find("'other'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("n_expanded_embd = 16, model intermediate_size = 32"), std::string::npos)
        << msg;
  }
  // Through the spec, with presets: Llama-2-7b's table for Llama-3.1-8B.
  try {
    make_profile_step_time("profile:" + kH100Llama2, find_model_preset("llama-3.1-8b"),
                           find_gpu_preset("h100-80g"), 1);
    FAIL();
  } catch (const std::invalid_argument& e) {
    const std::string msg = spell_params(e.what(), ParamSpelling::kCli);
    EXPECT_NE(msg.find("n_kv_head = 32, model num_key_value_heads = 8"), std::string::npos) << msg;
    EXPECT_EQ(msg.rfind("--step-time 'profile:", 0), 0u) << msg;
  }
}

TEST(ProfileTables, MalformedCsvNamesFileLineAndColumn) {
  ProfileDir dir;
  const auto error = [&](const std::string& text, bool all_reduce = false) {
    const std::string p = dir.write(all_reduce ? "all_reduce.csv" : "mlp.csv", text);
    try {
      if (all_reduce) {
        read_all_reduce_profile(p);
      } else {
        read_operator_profile(p);
      }
    } catch (const std::invalid_argument& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(p, 0), 0u) << msg;  // starts with the file
      return msg.substr(p.size());
    }
    ADD_FAILURE() << "no error for " << text;
    return std::string();
  };
  std::string good = mlp_csv({{1, 1, 0.1}, {2, 1, 0.2}});
  // Line 3 (the second row), column 4 = time_stats.emb.median is not read; column 19 =
  // time_stats.attn_rope.median is.
  const auto with_field = [&](int line, int column, const std::string& value) {
    std::istringstream in(good);
    std::string out, l;
    for (int n = 1; std::getline(in, l); ++n) {
      if (n == line) {
        std::vector<std::string> f;
        std::stringstream ls(l);
        for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
        f[static_cast<size_t>(column - 1)] = value;
        l.clear();
        for (size_t i = 0; i < f.size(); ++i) l += (i ? "," : "") + f[i];
      }
      out += l + "\n";
    }
    return out;
  };
  EXPECT_EQ(error(with_field(3, 19, "abc")),
            ":3:19: column \"time_stats.attn_rope.median\": expected a finite number >= 0, got "
            "\"abc\"");
  EXPECT_EQ(error(with_field(3, 19, "-1")).substr(0, 6), ":3:19:");
  EXPECT_EQ(error(with_field(2, 57, "0")),
            ":2:57: column \"num_tokens\": expected an integer >= 1, got \"0\"");
  EXPECT_EQ(error(with_field(3, 51, "40")),
            ":3:51: column \"n_head\": 40 differs from line 2's 4 (one table holds one model)");
  EXPECT_EQ(error(with_field(2, 56, "yes")),
            ":2:56: column \"use_gated_mlp\": expected True or False, got \"yes\"");
  EXPECT_EQ(error(good + "1,2\n"), ":4: expected 58 fields (as in the header), got 2");
  EXPECT_EQ(error("n_head,num_tokens\n"), ": missing column \"time_stats.input_layernorm.median\"");
  EXPECT_EQ(error(good.substr(0, good.find('\n') + 1)), ": no data rows");
  EXPECT_EQ(error("time_stats.all_reduce.median,num_workers,size\n0.1,2,1e3\n", true),
            ":2:3: column \"size\": expected an integer >= 1, got \"1e3\"");
  EXPECT_EQ(
      error("time_stats.all_reduce.median,num_workers,size,devices_per_node\n0.1,2,8,1\n", true),
      ": no all_reduce rows with devices_per_node == num_workers (one node)");
  EXPECT_THROW(read_operator_profile(dir.str() + "/absent.csv"), std::invalid_argument);
}

TEST(ProfileStepTime, SpecParsing) {
  const ModelSpec llama2 =
      load_hf_config(kSource + "/calibration/vllm-h100-runs/models/Llama-2-7b-hf.json");
  const GpuSpec& h100 = find_gpu_preset("h100-80g");
  const auto message = [&](const std::string& spec, int32_t tp = 1) {
    try {
      make_profile_step_time(spec, llama2, h100, tp);
    } catch (const std::invalid_argument& e) {
      return spell_params(e.what(), ParamSpelling::kCli);
    }
    return std::string("no error");
  };
  EXPECT_NE(message("profile:").find("expected profile:DIR"), std::string::npos);
  EXPECT_NE(message("profile:" + kH100Llama2 + ",mfu=1").find("unknown parameter 'mfu'"),
            std::string::npos);
  EXPECT_NE(message("profile:" + kH100Llama2 + ",attn_mfu=2").find("attn_mfu must be in"),
            std::string::npos);
  EXPECT_NE(message("profile:" + kH100Llama2 + ",overhead_ms=1,overhead_ms=2").find("twice"),
            std::string::npos);
  EXPECT_NE(message("profile:" + kH100Llama2 + ",overhead_ms").find("expected key=value"),
            std::string::npos);
  EXPECT_NE(message("profile:" + kH100Llama2, 2).find("needs an all-reduce table"),
            std::string::npos);
  EXPECT_EQ(message("profile:" + kH100Llama2 + ",all_reduce=" + kH100Dgx, 2), "no error");
  EXPECT_NE(message("profile:" + kH100Llama2 + ",all_reduce=" + kH100Dgx, 16)
                .find("no rows for tensor parallel size 16 (num_tensor_parallel_workers profiled: "
                      "1, 2, 4, 8)"),
            std::string::npos);
  EXPECT_EQ(message("profile:" + kH100Llama2 + "/mlp.csv,overhead_ms=0.5,attn_mbu=0.6"),
            "no error");
}

// Reads one column of the shipped table into (tokens -> value) for one TP, averaging repeats.
std::map<int64_t, double> shipped_layer_ms(int tp) {
  std::ifstream in(kH100Llama2 + "/mlp.csv");
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  std::stringstream hs(line);
  for (std::string x; std::getline(hs, x, ',');) header.push_back(x);
  std::map<int64_t, std::pair<double, int>> acc;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size(); ++i) row[header[i]] = f[i];
    if (std::stoi(row["num_tensor_parallel_workers"]) != tp) continue;
    double sum = 0;
    for (const auto op : kProfileLayerOps) {
      sum += std::stod(row["time_stats." + std::string(op) + ".median"]);
    }
    auto& [total, n] = acc[std::stoll(row["num_tokens"])];
    total += sum;
    ++n;
  }
  std::map<int64_t, double> out;
  for (const auto& [k, v] : acc) out[k] = v.first / v.second;
  return out;
}

TEST(ProfileStepTime, ShippedH100Llama2ReplayHasPlausibleDecodeSteps) {
  const ModelSpec llama2 =
      load_hf_config(kSource + "/calibration/vllm-h100-runs/models/Llama-2-7b-hf.json");
  const GpuSpec& h100 = find_gpu_preset("h100-80g");
  const auto model = make_profile_step_time("profile:" + kH100Llama2, llama2, h100, 1);
  const auto* m = dynamic_cast<const ProfileStepTime*>(model.get());
  ASSERT_NE(m, nullptr);
  const std::map<int64_t, double> table = shipped_layer_ms(1);
  ASSERT_TRUE(table.contains(64));
  // At profiled token counts the layer term is the table's sum of medians x 32 layers.
  for (const int64_t tokens : {1, 64, 512, 4096}) {
    EXPECT_NEAR(m->terms(decode_batch(static_cast<int>(tokens), 100)).layers,
                32 * table.at(tokens) * 1e-3, 1e-12)
        << tokens;
  }
  // Between two profiled counts: linear.
  const auto hi = table.upper_bound(100);
  const auto lo = std::prev(hi);
  const double f = (100.0 - lo->first) / static_cast<double>(hi->first - lo->first);
  EXPECT_NEAR(m->terms(decode_batch(100, 100)).layers,
              32 * (lo->second + f * (hi->second - lo->second)) * 1e-3, 1e-12);

  // A replay of 64 identical requests decoding together: every pure-decode step of 64 sequences
  // costs the formula's value and lies in a plausible 5..50 ms range.
  Trace t;
  for (int i = 0; i < 64; ++i) {
    TraceRequest r;
    r.arrival_ns = 0;
    r.input_tokens = 1000;
    r.output_tokens = 100;
    t.requests.push_back(r);
  }
  ReplayConfig cfg;
  cfg.scheduler.block_size = 16;
  cfg.scheduler.num_gpu_blocks = 64 * 70;
  cfg.scheduler.max_model_len = 4096;
  NullKvBackend null;
  const ReplayResult res = run_replay(cfg, t, null, *model);
  int checked = 0;
  for (const TimelineRow& row : res.timeline) {
    if (row.decode_tokens != 64 || row.prefill_tokens != 0) continue;
    const double ms = static_cast<double>(row.duration_ns) * 1e-6;
    EXPECT_GT(ms, 5.0);
    EXPECT_LT(ms, 50.0);
    ++checked;
  }
  EXPECT_GT(checked, 60);
  const StepWork w = decode_batch(64, 1000);
  const ProfileStepTime::Terms terms = m->terms(w);
  const double kappa = 2.0 * 32 * 4096 * 2;  // K and V, 32 layers, 32 heads x 128, fp16
  EXPECT_DOUBLE_EQ(terms.attn_kv, kappa * (64 * 1000 + 64) / (3350e9 * 0.7));
  EXPECT_NEAR(m->estimate(w).total_s,
              32 * table.at(64) * 1e-3 + terms.attn_compute + terms.attn_kv + 1e-3, 1e-12);
}

// The H200 profiles shipped in calibration/kvsim-h200/ (measured by tools/measure_gpu_profiles.sh):
// each loads for the model its folder names on h200-141g at every TP it has, says it was measured
// there, and is physically plausible: a one-token layer is no faster than reading its linear
// weights at the card's HBM bandwidth (and within 4x of that), and a 4096-token layer no faster
// than its GEMM FLOPs at the bf16 peak (and within 3x of that).
TEST(ProfileStepTime, ShippedH200ProfilesLoadAndArePlausible) {
  const GpuSpec& h200 = find_gpu_preset("h200-141g");
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(kSource + "/calibration/kvsim-h200")) {
    if (!entry.is_directory()) continue;
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    std::ifstream readme(entry.path() / "README.md");
    std::stringstream text;
    text << readme.rdbuf();
    EXPECT_NE(text.str().find("| card | NVIDIA H200 |"), std::string::npos);
    EXPECT_NE(text.str().find("| timings | measured"), std::string::npos);
    EXPECT_EQ(text.str().find("FAKE"), std::string::npos);
    const ModelSpec& spec = find_model_preset(name);
    const auto model = make_profile_step_time("profile:" + entry.path().string(), spec, h200, 1);
    const auto* m = dynamic_cast<const ProfileStepTime*>(model.get());
    ASSERT_NE(m, nullptr);
    const double layers = static_cast<double>(spec.num_layers);
    const double q = static_cast<double>(spec.num_attention_heads * spec.head_dim);
    const double kv = static_cast<double>(spec.num_kv_heads * spec.head_dim);
    const double d = static_cast<double>(spec.hidden_size);
    const double f = static_cast<double>(spec.intermediate_size);
    const double params = d * (q + 2 * kv) + q * d + d * 2 * f + f * d;  // per layer, linear ops
    const double one = m->terms(decode_batch(1, 1000)).layers / layers;
    const double hbm_floor = 2 * params / (h200.hbm_gb_per_s * 1e9);
    EXPECT_GT(one, hbm_floor);
    EXPECT_LT(one, 4 * hbm_floor);
    const double big = m->terms(decode_batch(4096, 1000)).layers / layers;
    const double flop_floor = 2 * 4096 * params / (h200.peak_bf16_tflops * 1e12);
    EXPECT_GT(big, flop_floor);
    EXPECT_LT(big, 3 * flop_floor);
    for (const int32_t tp : {2, 4, 8}) {
      if (spec.num_kv_heads % tp != 0) continue;
      EXPECT_NO_THROW(make_profile_step_time(
          "profile:" + entry.path().string() + ",all_reduce=" + kH100Dgx, spec, h200, tp))
          << "tp " << tp;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 7);
}

}  // namespace
}  // namespace kvsim
