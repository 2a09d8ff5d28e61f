#include "kvsim/sim/calibrate/measurements.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "kvsim/sim/io/csv.h"
#include "kvsim/sim/io/line_reader.h"
#include "kvsim/sim/io/parse_number.h"
#include "kvsim/sim/io/strict_json.h"

namespace kvsim {
namespace {

constexpr std::array<const char*, kNumLatencyStats> kStatNames = {
    "ttft_mean", "ttft_p50", "ttft_p90", "tpot_mean", "tpot_p50",
    "tpot_p90",  "e2e_mean", "e2e_p50",  "e2e_p90"};

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw std::invalid_argument(fmt::format("{}: {}", where, what));
}

int64_t seconds_to_ns(double s) {
  return std::llround(s * 1e9);
}

// Measured times are at most a day; a larger value is a unit mix-up (ms or us for seconds).
constexpr double kMaxSeconds = 86400.0;

double positive_seconds(const nlohmann::json& v, const std::string& where, bool allow_zero) {
  if (!v.is_number()) fail(where, fmt::format("must be a number of seconds, got {}", v.dump()));
  const double s = v.get<double>();
  if (!std::isfinite(s) || s < 0 || (!allow_zero && s == 0) || s > kMaxSeconds) {
    fail(where, fmt::format("must be a finite number of seconds in ({}, {:g}], got {}",
                            allow_zero ? "[0" : "(0", kMaxSeconds, v.dump()));
  }
  return s;
}

int32_t token_count(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t{1} << 30)) {
    fail(where, fmt::format("must be a token count (an integer >= 0), got {}", v.dump()));
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

double quantile(std::vector<double>& v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

struct Row {
  double arrival_s = 0;
  int32_t prompt_tokens = 0;
  int32_t output_tokens = 0;
  double ttft_s = 0;
  double e2e_s = 0;
};

// Per-request rows -> a trace (arrival order, relative to the first) and two groups split at the
// median arrival, so that a single file can still be cross-validated (fit one half, check the
// other) while the whole run is replayed.
void from_rows(std::vector<Row> rows, MeasuredRun& run) {
  if (rows.size() < 2) fail(run.path, "needs at least 2 measured requests");
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.arrival_s < b.arrival_s; });
  const double t0 = rows.front().arrival_s;
  std::vector<RequestLatency> first, second;
  const size_t half = rows.size() / 2;
  for (size_t i = 0; i < rows.size(); ++i) {
    TraceRequest r;
    r.arrival_ns = seconds_to_ns(rows[i].arrival_s - t0);
    r.input_tokens = rows[i].prompt_tokens;
    r.output_tokens = rows[i].output_tokens;
    r.source_line = static_cast<int64_t>(i) + 1;
    run.trace.requests.push_back(r);
    (i < half ? first : second).push_back({rows[i].ttft_s, rows[i].e2e_s, rows[i].output_tokens});
  }
  run.trace.rows_read = static_cast<int64_t>(rows.size());
  const int64_t split = run.trace.requests[half].arrival_ns;
  run.groups.push_back({"first half", 0, split, latency_stats(first)});
  run.groups.push_back(
      {"second half", split, std::numeric_limits<int64_t>::max(), latency_stats(second)});
}

void read_vllm_bench(const nlohmann::json& j, MeasuredRun& run) {
  run.kind = "vllm-bench";
  for (const char* key : {"start_times", "input_lens", "output_lens", "ttfts", "itls"}) {
    if (!j.contains(key) || !j.at(key).is_array()) {
      fail(run.path, fmt::format("vllm bench result without \"{}\" (save it with --save-result "
                                 "--save-detailed)",
                                 key));
    }
  }
  const size_t n = j.at("ttfts").size();
  for (const char* key : {"start_times", "input_lens", "output_lens", "itls"}) {
    if (j.at(key).size() != n) {
      fail(run.path, fmt::format("\"{}\" has {} entries, \"ttfts\" {}", key, j.at(key).size(), n));
    }
  }
  const nlohmann::json* errors = j.contains("errors") ? &j.at("errors") : nullptr;
  std::vector<Row> rows;
  for (size_t i = 0; i < n; ++i) {
    const std::string at = fmt::format("{}: request {}", run.path, i);
    const bool failed = errors != nullptr && i < errors->size() && (*errors)[i].is_string() &&
                        !(*errors)[i].get<std::string>().empty();
    if (failed) {
      ++run.skipped_requests;
      continue;
    }
    Row r;
    r.arrival_s = positive_seconds(j.at("start_times")[i], at + ", start_times", true);
    r.prompt_tokens = token_count(j.at("input_lens")[i], at + ", input_lens");
    r.output_tokens = token_count(j.at("output_lens")[i], at + ", output_lens");
    r.ttft_s = positive_seconds(j.at("ttfts")[i], at + ", ttfts", false);
    double decode = 0;
    const nlohmann::json& itl = j.at("itls")[i];
    if (!itl.is_array()) fail(at + ", itls", "must be an array of seconds");
    for (size_t k = 0; k < itl.size(); ++k) {
      decode += positive_seconds(itl[k], fmt::format("{}, itls[{}]", at, k), true);
    }
    r.e2e_s = r.ttft_s + decode;
    if (r.prompt_tokens == 0 || r.output_tokens == 0) {
      ++run.skipped_requests;
      continue;
    }
    rows.push_back(r);
  }
  from_rows(std::move(rows), run);
}

// One table row given as named fields (CSV columns or JSONL keys).
Row row_from(const nlohmann::json& o, const std::string& where) {
  auto field = [&](const char* key) -> const nlohmann::json& {
    if (!o.contains(key)) fail(where, fmt::format("missing field \"{}\"", key));
    return o.at(key);
  };
  Row r;
  r.arrival_s = positive_seconds(field("arrival_s"), where + ", field arrival_s", true);
  r.prompt_tokens = token_count(field("prompt_tokens"), where + ", field prompt_tokens");
  r.output_tokens = token_count(field("output_tokens"), where + ", field output_tokens");
  if (r.prompt_tokens == 0 || r.output_tokens == 0) {
    fail(where, "prompt_tokens and output_tokens must be >= 1");
  }
  if (o.contains("ttft_s") || o.contains("e2e_s")) {
    r.ttft_s = positive_seconds(field("ttft_s"), where + ", field ttft_s", false);
    r.e2e_s = positive_seconds(field("e2e_s"), where + ", field e2e_s", false);
  } else {
    const double first =
        positive_seconds(field("first_token_s"), where + ", field first_token_s", true);
    const double last =
        positive_seconds(field("last_token_s"), where + ", field last_token_s", true);
    r.ttft_s = first - r.arrival_s;
    r.e2e_s = last - r.arrival_s;
    if (!(r.ttft_s > 0)) fail(where, "first_token_s must be after arrival_s");
  }
  if (r.e2e_s < r.ttft_s) fail(where, "the last token comes before the first");
  return r;
}

void read_table(std::string_view text, MeasuredRun& run) {
  run.kind = "requests";
  std::vector<Row> rows;
  std::vector<std::string> header;
  csv::Splitter splitter;
  int64_t line_no = 0;
  size_t pos = 0;
  bool jsonl = false;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      if (pos > text.size()) break;
      continue;
    }
    const std::string where = fmt::format("{}:{}", run.path, line_no);
    if (header.empty() && !jsonl) {
      if (line.front() == '{') {
        jsonl = true;
      } else {
        if (const std::string e = splitter.split(line); !e.empty()) fail(where, e);
        for (std::string_view f : splitter.fields()) header.emplace_back(f);
        continue;
      }
    }
    nlohmann::json o;
    if (jsonl) {
      o = parse_strict_json(line, run.path, line_no);
      if (!o.is_object()) fail(where, "each line must be a JSON object");
    } else {
      if (const std::string e = splitter.split(line); !e.empty()) fail(where, e);
      const auto& f = splitter.fields();
      if (f.size() != header.size()) {
        fail(where, fmt::format("{} fields, the header has {}", f.size(), header.size()));
      }
      o = nlohmann::json::object();
      for (size_t c = 0; c < f.size(); ++c) {
        if (f[c].find('\0') != std::string_view::npos) fail(where, "NUL byte in a field");
        if (const std::optional<int64_t> i = parse_integer<int64_t>(f[c])) {
          o[header[c]] = *i;
        } else if (const std::optional<double> d = parse_finite_double(f[c])) {
          o[header[c]] = *d;
        } else {
          o[header[c]] = std::string(f[c]);
        }
      }
    }
    rows.push_back(row_from(o, where));
  }
  from_rows(std::move(rows), run);
}

std::optional<int32_t> optional_int(const nlohmann::json& s, const std::string& where,
                                    const char* key) {
  if (!s.contains(key)) return std::nullopt;
  const nlohmann::json& v = s.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t{1} << 30)) {
    fail(where, fmt::format("settings.{} must be an integer >= 1, got {}", key, v.dump()));
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

void read_run_file(const nlohmann::json& j, MeasuredRun& run) {
  run.kind = "run";
  static const std::vector<std::string> known = {"format", "trace", "settings", "groups", "source"};
  for (const auto& [key, value] : j.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      fail(run.path, fmt::format("unknown key \"{}\"", key));
    }
  }
  if (j.at("format") != "kvsim-calibration-run/1") {
    fail(run.path, fmt::format("\"format\" must be \"kvsim-calibration-run/1\", got {}",
                               j.at("format").dump()));
  }
  const std::filesystem::path dir = std::filesystem::path(run.path).parent_path();
  auto relative = [&](const std::string& p) {
    return std::filesystem::path(p).is_absolute() ? p : (dir / p).string();
  };
  if (!j.contains("trace") || !j.at("trace").is_string()) {
    fail(run.path, "\"trace\" must name a kvsim trace file");
  }
  run.trace_path = relative(j.at("trace").get<std::string>());
  run.trace = read_trace(run.trace_path);
  if (j.contains("settings")) {
    const nlohmann::json& s = j.at("settings");
    if (!s.is_object()) fail(run.path, "\"settings\" must be an object");
    static const std::vector<std::string> keys = {"model",
                                                  "config",
                                                  "gpu",
                                                  "tensor_parallel_size",
                                                  "max_num_batched_tokens",
                                                  "max_num_seqs",
                                                  "max_model_len",
                                                  "gpu_memory_utilization"};
    for (const auto& [key, value] : s.items()) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        fail(run.path, fmt::format("unknown key \"settings.{}\"", key));
      }
      if ((key == "model" || key == "config" || key == "gpu") && !value.is_string()) {
        fail(run.path, fmt::format("settings.{} must be a string", key));
      }
    }
    RunSettings& rs = run.settings;
    if (s.contains("model")) rs.model = s.at("model").get<std::string>();
    if (s.contains("config")) rs.config = relative(s.at("config").get<std::string>());
    if (s.contains("gpu")) rs.gpu = s.at("gpu").get<std::string>();
    rs.tensor_parallel_size = optional_int(s, run.path, "tensor_parallel_size");
    rs.max_num_batched_tokens = optional_int(s, run.path, "max_num_batched_tokens");
    rs.max_num_seqs = optional_int(s, run.path, "max_num_seqs");
    rs.max_model_len = optional_int(s, run.path, "max_model_len");
    if (s.contains("gpu_memory_utilization")) {
      const nlohmann::json& v = s.at("gpu_memory_utilization");
      if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() <= 1)) {
        fail(run.path, "settings.gpu_memory_utilization must be a number in (0, 1]");
      }
      rs.gpu_memory_utilization = v.get<double>();
    }
  }
  if (!j.contains("groups") || !j.at("groups").is_array() || j.at("groups").empty()) {
    fail(run.path, "\"groups\" must be a non-empty array");
  }
  for (size_t g = 0; g < j.at("groups").size(); ++g) {
    const nlohmann::json& o = j.at("groups")[g];
    const std::string where = fmt::format("{}: groups[{}]", run.path, g);
    if (!o.is_object()) fail(where, "must be an object");
    MeasuredGroup group;
    group.name = o.contains("name") && o.at("name").is_string() ? o.at("name").get<std::string>()
                                                                : fmt::format("group {}", g);
    bool any = false;
    for (const auto& [key, value] : o.items()) {
      if (key == "name") continue;
      if (key == "arrival_from_s" || key == "arrival_to_s") {
        const int64_t ns = seconds_to_ns(positive_seconds(value, where + ", " + key, true));
        (key == "arrival_from_s" ? group.arrival_from_ns : group.arrival_to_ns) = ns;
        continue;
      }
      const std::string name = key;  // a structured binding cannot be captured (C++20)
      const auto it = std::find_if(kStatNames.begin(), kStatNames.end(),
                                   [&](const char* n) { return name == std::string(n) + "_s"; });
      if (it == kStatNames.end()) fail(where, fmt::format("unknown key \"{}\"", key));
      group.stats[static_cast<size_t>(it - kStatNames.begin())] =
          positive_seconds(value, where + ", " + key, false);
      any = true;
    }
    if (!any) fail(where, "has no measured statistic (e.g. \"ttft_mean_s\")");
    if (group.arrival_from_ns >= group.arrival_to_ns) fail(where, "arrival window is empty");
    run.groups.push_back(std::move(group));
  }
}

}  // namespace

const char* to_string(LatencyStat s) {
  return kStatNames[static_cast<size_t>(s)];
}

LatencyStats latency_stats(const std::vector<RequestLatency>& requests) {
  LatencyStats out = no_stats();
  std::vector<double> ttft, tpot, e2e;
  for (const RequestLatency& r : requests) {
    ttft.push_back(r.ttft_s);
    e2e.push_back(r.e2e_s);
    if (r.output_tokens >= 2) tpot.push_back((r.e2e_s - r.ttft_s) / (r.output_tokens - 1));
  }
  auto fill = [&](std::vector<double>& v, LatencyStat mean) {
    if (v.empty()) return;
    const auto i = static_cast<size_t>(mean);
    out[i] = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    out[i + 1] = quantile(v, 0.5);
    out[i + 2] = quantile(v, 0.9);
  };
  fill(ttft, LatencyStat::kTtftMean);
  fill(tpot, LatencyStat::kTpotMean);
  fill(e2e, LatencyStat::kE2eMean);
  // A zero statistic (e.g. TPOT of requests that emitted all tokens at once) cannot be fitted
  // in log space: leave it out.
  for (double& s : out) {
    if (!(s > 0)) s = std::numeric_limits<double>::quiet_NaN();
  }
  return out;
}

MeasuredRun read_measurements(const std::string& path) {
  MeasuredRun run;
  run.path = path;
  InputLimits limits;
  limits.has_flags = false;
  const std::string text = read_text_file(path, limits);
  run.data_hash = XXH3_64bits(text.data(), text.size());
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{' &&
      text.find('\n', first) != std::string::npos && text.find("\n{", first) != std::string::npos) {
    read_table(text, run);  // JSONL: one object per line
    return run;
  }
  if (first != std::string::npos && text[first] == '{') {
    const nlohmann::json j = parse_strict_json(text, path);
    if (j.contains("ttfts")) {
      read_vllm_bench(j, run);
    } else if (j.contains("format")) {
      read_run_file(j, run);
    } else {
      fail(path,
           "a JSON object that is neither a vllm bench result (\"ttfts\") nor a kvsim run "
           "file (\"format\": \"kvsim-calibration-run/1\")");
    }
    return run;
  }
  read_table(text, run);
  return run;
}

}  // namespace kvsim
