// kvsim_gpu_profile: measures one model's operator tables on this machine's GPU and writes a
// directory for `--step-time profile:DIR` (docs/step-time-model.md, "Profiling your own card").
//
//   kvsim_gpu_profile --model llama-3.1-8b --gpu h200-141g --out profiles/h200-llama-3.1-8b
//
// Exit status: 0 written; 1 bad arguments or a failure (one line on stderr); 2 no CUDA device
// (nothing written; --dry-run writes fake timings without one, labelled FAKE in README.md).
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cuda_operator_timer.h"
#include "kvsim/core/model_presets.h"
#include "kvsim/sim/engine/profile_writer.h"

namespace kvsim {
namespace {

constexpr const char* kUsage =
    "usage: kvsim_gpu_profile --out DIR [--model NAME] [--gpu PRESET] [--tp 1,2,4,8]\n"
    "                         [--grid vidur|coarse] [--max-tokens N] [--warmup N] [--reps N]\n"
    "                         [--commit SHA] [--dry-run]\n"
    "  --model   a kvsim model preset (dense, GQA; default llama-3.1-8b)\n"
    "  --gpu     the kvsim GPU preset of this card (default: from the device name, h100/h200/\n"
    "            a100/l40s); attn_mbu is relative to its bandwidth\n"
    "  --tp      ranks whose shard is timed (default: 1, 2, 4, 8 where the heads divide)\n"
    "  --grid    vidur: Vidur's 259 token counts to 4096 (default); coarse: 24 (2^k, 3*2^k)\n"
    "  --dry-run no GPU: arithmetic timings from the preset, README.md marked FAKE\n";

// The preset of a device name, or "" when unknown.
std::string preset_for_device(std::string_view name) {
  const auto has = [&](std::string_view s) { return name.find(s) != std::string_view::npos; };
  if (has("H200")) return "h200-141g";
  if (has("H100")) return has("PCIe") ? "h100-pcie" : "h100-80g";
  if (has("A100")) return has("40GB") ? "a100-40g" : "a100-80g";
  if (has("L40S")) return "l40s";
  return "";
}

// No GPU: a roofline with 5/3/10 us launch costs (tests of the pipeline only).
class ArithmeticTimer final : public OperatorTimer {
 public:
  explicit ArithmeticTimer(const GpuSpec& g)
      : flops_(g.peak_bf16_tflops * 1e12 * 0.7), bytes_(g.hbm_gb_per_s * 1e9) {}
  std::vector<double> gemm(int64_t m, int64_t n, int64_t k, int32_t, int32_t reps) override {
    return same(0.005 + 2.0 * static_cast<double>(m) * static_cast<double>(n) *
                            static_cast<double>(k) / flops_ * 1e3,
                reps);
  }
  std::vector<double> memory(int64_t r, int64_t w, int32_t, int32_t reps) override {
    return same(0.003 + static_cast<double>(r + w) / (bytes_ * 0.8) * 1e3, reps);
  }
  std::vector<double> decode_attention(const DecodeAttentionShape& s, int32_t,
                                       int32_t reps) override {
    return same(0.01 + static_cast<double>(s.kv_bytes()) / (bytes_ * 0.7) * 1e3, reps);
  }

 private:
  static std::vector<double> same(double v, int32_t reps) {
    return std::vector<double>(static_cast<size_t>(reps), v);
  }
  double flops_, bytes_;
};

int64_t to_int(std::string_view flag, const std::string& v, int64_t min) {
  try {
    size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used == v.size() && x >= min) return x;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(fmt::format("{}: expected an integer >= {}, got '{}'", flag, min, v));
}

std::string git_commit() {
  const std::string cmd = fmt::format("git -C '{}' rev-parse HEAD 2>/dev/null", KVSIM_SOURCE_DIR);
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "unknown";
  std::array<char, 128> buf{};
  std::string out;
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), p) != nullptr) out += buf.data();
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out.empty() ? "unknown" : out;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::array<char, 32> buf{};
  std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf.data();
}

int run(int argc, char** argv) {
  std::string out, model_name = "llama-3.1-8b", gpu_name, grid = "vidur", commit;
  std::vector<int32_t> tps;
  int64_t max_tokens = 4096, warmup = 3, reps = 15;
  bool dry_run = false;
  std::string command = "kvsim_gpu_profile";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--dry-run") {
      dry_run = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(fmt::format("{} needs a value", a));
    const std::string v = argv[++i];
    if (a == "--out") {
      out = v;
    } else if (a == "--model") {
      model_name = v;
    } else if (a == "--gpu") {
      gpu_name = v;
    } else if (a == "--grid") {
      grid = v;
    } else if (a == "--commit") {
      commit = v;
    } else if (a == "--max-tokens") {
      max_tokens = to_int(a, v, 1);
    } else if (a == "--warmup") {
      warmup = to_int(a, v, 0);
    } else if (a == "--reps") {
      reps = to_int(a, v, 1);
    } else if (a == "--tp") {
      size_t start = 0;
      while (start <= v.size()) {
        const size_t comma = v.find(',', start);
        const std::string item = v.substr(start, comma - start);
        tps.push_back(static_cast<int32_t>(to_int(a, item, 1)));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else {
      throw std::invalid_argument(fmt::format("unknown option '{}'\n{}", a, kUsage));
    }
  }
  if (out.empty()) throw std::invalid_argument(fmt::format("--out DIR is required\n{}", kUsage));
  if (max_tokens > 65536 || warmup > 1000 || reps > 1000) {
    throw std::invalid_argument("--max-tokens <= 65536, --warmup and --reps <= 1000");
  }

  const ModelSpec& model = find_model_preset(model_name);
  GpuProfilePlan plan = make_gpu_profile_plan(model, tps, grid, max_tokens);
  plan.warmup = static_cast<int32_t>(warmup);
  plan.repetitions = static_cast<int32_t>(reps);

  ProfileProvenance prov;
  std::unique_ptr<OperatorTimer> timer;
  if (dry_run) {
    prov.card = "none (dry run)";
    prov.measured = false;
    if (gpu_name.empty()) gpu_name = "h100-80g";
    timer = std::make_unique<ArithmeticTimer>(find_gpu_preset(gpu_name));
  } else {
    prov.card = cuda_device_name();
    if (prov.card.empty()) {
      std::cerr << "kvsim_gpu_profile: no CUDA device (nothing written; --dry-run checks the "
                   "pipeline without one)\n";
      return 2;
    }
    if (gpu_name.empty()) gpu_name = preset_for_device(prov.card);
    if (gpu_name.empty()) {
      throw std::invalid_argument(fmt::format(
          "no kvsim GPU preset known for '{}': pass --gpu PRESET (kvsim's --gpu name)", prov.card));
    }
    timer = make_cuda_operator_timer();
  }
  const GpuSpec& gpu = find_gpu_preset(gpu_name);
  prov.gpu_preset = gpu.name;
  prov.hbm_bytes_per_s = gpu.hbm_gb_per_s * 1e9;
  prov.date = utc_now();
  prov.commit = commit.empty() ? git_commit() : commit;
  prov.command = command;

  const auto t0 = std::chrono::steady_clock::now();
  std::cerr << fmt::format("kvsim_gpu_profile: {} on {} ({}), tp {}, {} token counts{}\n",
                           model.name, prov.card, gpu.name, fmt::join(plan.tps, ","),
                           plan.tokens.size(), dry_run ? ", DRY RUN (fake timings)" : "");
  const GpuProfileResult result = run_gpu_profile(plan, *timer, [&](const std::string& note) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cerr << fmt::format("  [{:.1f} s] {}\n", s, note);
  });
  const std::string spec = write_profile_dir(out, result, prov);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << fmt::format(
      "kvsim_gpu_profile: wrote {}/mlp.csv ({} rows), attention.csv, "
      "README.md in {:.1f} s\n",
      out, result.mlp.size(), s);
  std::cout << "--model " << model.name << " --gpu " << gpu.name << " --step-time " << spec << "\n";
  return 0;
}

}  // namespace
}  // namespace kvsim

int main(int argc, char** argv) {
  try {
    return kvsim::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "kvsim_gpu_profile: " << e.what() << "\n";
    return 1;
  }
}
