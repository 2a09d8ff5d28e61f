#include "kvsim/sim/engine/profile_writer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kvsim/core/planner.h"

namespace kvsim {
namespace {

constexpr int64_t kBf16 = 2;

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

// Shortest text that reads back as the same double.
std::string num(double v) {
  return fmt::format("{}", v);
}

std::string stats_fields(const TimingStats& s) {
  return fmt::format("{},{},{},{},{}", num(s.min), num(s.max), num(s.mean), num(s.median),
                     num(s.std));
}

void write_file(const std::filesystem::path& path, const std::function<void(std::ostream&)>& f) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(fmt::format("{}: cannot open for writing", path.string()));
  f(out);
  out.flush();
  if (!out) throw std::runtime_error(fmt::format("{}: write failed", path.string()));
}

}  // namespace

TimingStats summarize_timings(std::span<const double> samples_ms) {
  require(!samples_ms.empty(), "no timing samples");
  std::vector<double> v(samples_ms.begin(), samples_ms.end());
  for (const double x : v) {
    require(std::isfinite(x) && x >= 0, fmt::format("bad timing sample {} ms", x));
  }
  std::sort(v.begin(), v.end());
  TimingStats s;
  s.samples = static_cast<int32_t>(v.size());
  s.min = v.front();
  s.max = v.back();
  const size_t n = v.size();
  s.median = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  double sum = 0;
  for (const double x : v) sum += x;
  s.mean = sum / static_cast<double>(n);
  double sq = 0;
  for (const double x : v) sq += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(sq / static_cast<double>(n));
  return s;
}

std::vector<LayerOpShape> layer_op_shapes(const ModelSpec& m, int32_t tp) {
  require(tp >= 1, fmt::format("tensor parallel size must be >= 1, got {}", tp));
  require(m.num_experts == 0,
          fmt::format("model '{}' is a mixture of experts: the profiler times dense MLPs only",
                      m.name));
  require(!m.use_mla,
          fmt::format("model '{}' uses MLA: the profiler times GQA attention only", m.name));
  require(m.num_attention_heads > 0 && m.hidden_size > 0 && m.intermediate_size > 0 &&
              m.head_dim > 0 && m.num_kv_heads > 0,
          fmt::format("model '{}' lacks heads, hidden, intermediate size or head_dim", m.name));
  require(m.num_attention_heads % tp == 0,
          fmt::format("model '{}': tensor parallel size {} does not divide its {} query heads",
                      m.name, tp, m.num_attention_heads));
  require(m.intermediate_size % tp == 0,
          fmt::format("model '{}': tensor parallel size {} does not divide its intermediate size "
                      "{}",
                      m.name, tp, m.intermediate_size));
  const int64_t d = m.hidden_size;
  const int64_t dh = m.head_dim;
  const int64_t hq = m.num_attention_heads / tp;
  const int64_t hkv = kv_heads_per_rank(m.num_kv_heads, tp);
  const int64_t inter = m.intermediate_size / tp;
  using K = LayerOpShape::Kind;
  const auto gemm = [](std::string_view op, int64_t n, int64_t k) {
    return LayerOpShape{op, K::kGemm, n, k, 0, 0};
  };
  const auto memory = [](std::string_view op, int64_t read, int64_t write) {
    return LayerOpShape{op, K::kMemory, 0, 0, read * kBf16, write * kBf16};
  };
  return {memory("emb", d, d),
          memory("input_layernorm", 2 * d, 2 * d),
          gemm("attn_pre_proj", (hq + 2 * hkv) * dh, d),
          memory("attn_rope", (hq + hkv) * dh, (hq + hkv) * dh),
          gemm("attn_post_proj", d, hq * dh),
          memory("post_attention_layernorm", 2 * d, 2 * d),
          gemm("mlp_up_proj", 2 * inter, d),
          memory("mlp_act", 2 * inter, inter),
          gemm("mlp_down_proj", d, inter),
          memory("add", 2 * d, d)};
}

std::vector<int64_t> vidur_token_grid(int64_t max_tokens) {
  require(max_tokens >= 1, fmt::format("max tokens must be >= 1, got {}", max_tokens));
  std::vector<int64_t> g;
  for (const int64_t t : {1, 2, 4}) {
    if (t <= max_tokens) g.push_back(t);
  }
  int64_t step = 8, limit = 1024;
  for (int64_t t = 8; t <= max_tokens; t += step) {
    g.push_back(t);
    if (t >= limit) {
      step *= 2;
      limit *= 2;
    }
  }
  if (g.back() != max_tokens) g.push_back(max_tokens);
  return g;
}

std::vector<int64_t> coarse_token_grid(int64_t max_tokens) {
  require(max_tokens >= 1, fmt::format("max tokens must be >= 1, got {}", max_tokens));
  std::set<int64_t> s;
  for (int64_t p = 1; p <= max_tokens; p *= 2) {
    s.insert(p);
    if (3 * p <= max_tokens) s.insert(3 * p);
  }
  s.insert(max_tokens);
  return {s.begin(), s.end()};
}

int64_t DecodeAttentionShape::kv_bytes() const noexcept {
  return int64_t{batch} * context * kv_heads * head_dim * 2 * kBf16;
}

std::vector<DecodeAttentionShape> decode_attention_grid(const ModelSpec& model,
                                                        std::span<const int32_t> tps,
                                                        int64_t max_pool_tokens) {
  std::vector<DecodeAttentionShape> out;
  for (const int32_t tp : tps) {
    (void)layer_op_shapes(model, tp);  // the same refusals
    for (const int32_t batch : {1, 4, 16, 64, 256}) {
      for (const int64_t context : {256, 1024, 4096, 16384}) {
        if (batch * context > max_pool_tokens) continue;
        DecodeAttentionShape a;
        a.tp = tp;
        a.batch = batch;
        a.context = context;
        a.kv_heads = static_cast<int32_t>(kv_heads_per_rank(model.num_kv_heads, tp));
        a.head_dim = static_cast<int32_t>(model.head_dim);
        out.push_back(a);
      }
    }
  }
  return out;
}

GpuProfilePlan make_gpu_profile_plan(const ModelSpec& model, std::vector<int32_t> tps,
                                     std::string_view grid, int64_t max_tokens) {
  GpuProfilePlan p;
  p.model = model;
  if (tps.empty()) {
    for (const int32_t tp : {1, 2, 4, 8}) {
      if (model.num_attention_heads % tp == 0 && model.intermediate_size % tp == 0) {
        tps.push_back(tp);
      }
    }
  }
  std::sort(tps.begin(), tps.end());
  tps.erase(std::unique(tps.begin(), tps.end()), tps.end());
  for (const int32_t tp : tps) (void)layer_op_shapes(model, tp);
  p.tps = std::move(tps);
  require(!p.tps.empty(),
          fmt::format("model '{}': no tensor parallel size to profile", model.name));
  if (grid == "vidur") {
    p.tokens = vidur_token_grid(max_tokens);
  } else if (grid == "coarse") {
    p.tokens = coarse_token_grid(max_tokens);
  } else {
    throw std::invalid_argument(fmt::format("grid must be vidur or coarse, got '{}'", grid));
  }
  p.attention = decode_attention_grid(model, p.tps);
  return p;
}

GpuProfileResult run_gpu_profile(const GpuProfilePlan& plan, OperatorTimer& timer,
                                 const std::function<void(const std::string&)>& progress) {
  require(plan.warmup >= 0 && plan.repetitions >= 1,
          fmt::format("warmup must be >= 0 and repetitions >= 1, got {} and {}", plan.warmup,
                      plan.repetitions));
  GpuProfileResult r;
  r.model = plan.model;
  for (const int32_t tp : plan.tps) {
    const std::vector<LayerOpShape> shapes = layer_op_shapes(plan.model, tp);
    if (progress) {
      progress(fmt::format("tp {}: {} operators x {} token counts", tp, shapes.size(),
                           plan.tokens.size()));
    }
    for (const int64_t tokens : plan.tokens) {
      MlpRow row;
      row.tp = tp;
      row.tokens = tokens;
      for (size_t i = 0; i < shapes.size(); ++i) {
        const LayerOpShape& s = shapes[i];
        const std::vector<double> samples =
            s.kind == LayerOpShape::Kind::kGemm
                ? timer.gemm(tokens, s.n, s.k, plan.warmup, plan.repetitions)
                : timer.memory(tokens * s.read_bytes_per_token, tokens * s.write_bytes_per_token,
                               plan.warmup, plan.repetitions);
        row.ops[i] = summarize_timings(samples);
      }
      r.mlp.push_back(row);
    }
  }
  if (progress && !plan.attention.empty()) {
    progress(fmt::format("decode attention: {} shapes", plan.attention.size()));
  }
  for (const DecodeAttentionShape& a : plan.attention) {
    r.attention.push_back(
        {a, summarize_timings(timer.decode_attention(a, plan.warmup, plan.repetitions))});
  }
  return r;
}

void write_mlp_csv(std::ostream& out, const GpuProfileResult& r) {
  std::string header;
  for (const std::string_view op : kMlpCsvOps) {
    for (const char* stat : {"min", "max", "mean", "median", "std"}) {
      header += fmt::format("time_stats.{}.{},", op, stat);
    }
  }
  header +=
      "n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp,num_tokens,"
      "num_tensor_parallel_workers\n";
  out << header;
  const ModelSpec& m = r.model;
  // The reader requires vocab_size >= 1; a spec without one records 1 (no term depends on it).
  const std::string shape =
      fmt::format("{},{},{},{},{},True", m.num_attention_heads, m.num_kv_heads, m.hidden_size,
                  m.intermediate_size, std::max<int64_t>(m.vocab_size, 1));
  for (const MlpRow& row : r.mlp) {
    std::string line;
    for (const TimingStats& s : row.ops) line += stats_fields(s) + ",";
    out << line << shape << "," << row.tokens << "," << row.tp << "\n";
  }
}

void write_attention_csv(std::ostream& out, const GpuProfileResult& r) {
  out << "time_stats.attn_decode.min,time_stats.attn_decode.max,time_stats.attn_decode.mean,"
         "time_stats.attn_decode.median,time_stats.attn_decode.std,num_tensor_parallel_workers,"
         "batch_size,context_tokens,n_kv_head_per_rank,head_dim,block_size,kv_bytes\n";
  for (const AttentionRow& a : r.attention) {
    const DecodeAttentionShape& s = a.shape;
    out << stats_fields(a.stats)
        << fmt::format(",{},{},{},{},{},{},{}\n", s.tp, s.batch, s.context, s.kv_heads, s.head_dim,
                       s.block_size, s.kv_bytes());
  }
}

std::optional<double> fit_attention_mbu(std::span<const AttentionRow> rows,
                                        double hbm_bytes_per_s) {
  if (!(hbm_bytes_per_s > 0) || rows.size() < 2) return std::nullopt;
  double sx = 0, sy = 0;
  for (const AttentionRow& a : rows) {
    sx += static_cast<double>(a.shape.kv_bytes());
    sy += a.stats.median;
  }
  const double n = static_cast<double>(rows.size());
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0;
  for (const AttentionRow& a : rows) {
    const double dx = static_cast<double>(a.shape.kv_bytes()) - mx;
    sxx += dx * dx;
    sxy += dx * (a.stats.median - my);
  }
  if (!(sxx > 0)) return std::nullopt;
  const double slope_ms_per_byte = sxy / sxx;
  if (!(slope_ms_per_byte > 0)) return std::nullopt;
  const double mbu = 1.0 / (slope_ms_per_byte * 1e-3 * hbm_bytes_per_s);
  return std::clamp(mbu, 0.001, 1.0);
}

std::string write_profile_dir(const std::string& dir, const GpuProfileResult& r,
                              const ProfileProvenance& p) {
  namespace fs = std::filesystem;
  const fs::path root(dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot create: {}", dir, ec.message()));
  write_file(root / "mlp.csv", [&](std::ostream& o) { write_mlp_csv(o, r); });
  write_file(root / "attention.csv", [&](std::ostream& o) { write_attention_csv(o, r); });
  const std::optional<double> mbu = fit_attention_mbu(r.attention, p.hbm_bytes_per_s);
  const std::string spec =
      mbu ? fmt::format("profile:{},attn_mbu={:.3f}", dir, *mbu) : "profile:" + dir;
  std::set<int32_t> tps;
  std::set<int64_t> tokens;
  for (const MlpRow& row : r.mlp) {
    tps.insert(row.tp);
    tokens.insert(row.tokens);
  }
  const int32_t reps = r.mlp.empty() ? 0 : r.mlp.front().ops.front().samples;
  write_file(root / "README.md", [&](std::ostream& o) {
    o << (p.measured ? "# Measured operator profile (kvsim_gpu_profile)\n\n"
                     : "# FAKE TIMINGS: not measured on a GPU (a test or dry run)\n\n");
    o << fmt::format(
        "| | |\n|---|---|\n| model | {} (hidden {}, {} query / {} KV heads x {}, intermediate "
        "{}) |\n| card | {} |\n| kvsim --gpu | {} |\n| date (UTC) | {} |\n| kvsim commit | {} |\n"
        "| command | `{}` |\n| timings | {} |\n| tensor parallel sizes | {} (each rank's shard "
        "timed on one GPU; no communication) |\n| num_tokens | {} points, {} to {} |\n\n",
        r.model.name, r.model.hidden_size, r.model.num_attention_heads, r.model.num_kv_heads,
        r.model.head_dim, r.model.intermediate_size, p.card, p.gpu_preset, p.date, p.commit,
        p.command,
        p.measured ? fmt::format("measured: median of {} CUDA-event timings per shape after "
                                 "warm-up",
                                 reps)
                   : "FAKE (arithmetic, not a GPU)",
        fmt::join(tps, ", "), tokens.size(), tokens.empty() ? 0 : *tokens.begin(),
        tokens.empty() ? 0 : *tokens.rbegin());
    o << "Files:\n\n"
         "- `mlp.csv`: Vidur's layout, read by `--step-time profile:DIR`. GEMMs are cuBLAS bf16 "
         "at each rank's shape (fused QKV, O, fused gate+up, down); emb, the norms, RoPE, the "
         "activation and the residual add are timed as a kernel streaming the bytes each moves "
         "(sim/include/kvsim/sim/engine/profile_writer.h).\n"
         "- `attention.csv`: decode attention's KV read (kvsim's paged gather over a block "
         "table, one layer), by batch and context. The step-time model does not read it; its "
         "least-squares bandwidth is the attn_mbu below.\n\n";
    o << fmt::format(
        "Use it as (with the same model and --gpu):\n\n    --model {} --gpu {} "
        "--step-time {}\n\n",
        r.model.name, p.gpu_preset, spec);
    o << fmt::format("attn_mbu: {}\n\n",
                     mbu ? fmt::format("{:.3f} of {:.0f} GB/s (fitted on {} decode rows)", *mbu,
                                       p.hbm_bytes_per_s / 1e9, r.attention.size())
                         : std::string("not fitted (too few rows or no bandwidth); the card's "
                                       "default applies"));
    o << "At tensor parallel size > 1 the model also needs an all-reduce table (one GPU cannot "
         "measure it): add `,all_reduce=FILE`, e.g. "
         "calibration/vidur/network/h100_dgx/all_reduce.csv.\n";
  });
  return spec;
}

}  // namespace kvsim
