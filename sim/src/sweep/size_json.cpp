// kvsim size: the JSON report and reading it back for --merge.
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "kvsim/core/param.h"
#include "kvsim/sim/io/strict_json.h"
#include "kvsim/sim/sweep/size_report.h"
#include "size_merge_checks.h"

namespace kvsim {
namespace {

using ojson = nlohmann::ordered_json;

ojson opt_number(const std::optional<double>& v) {
  return v ? ojson(*v) : ojson(nullptr);
}
template <typename T>
ojson opt_int(const std::optional<T>& v) {
  return v ? ojson(*v) : ojson(nullptr);
}

ojson trial_json(const SizeTrial& t) {
  ojson j;
  j["replicas"] = t.replicas;
  j["meets_slo"] = t.meets_slo;
  j["stopped_early"] = t.stopped_early;
  j["ttft_p99_s"] = t.ttft_p99_s;
  j["tpot_p99_s"] = t.tpot_p99_s;
  j["e2e_p99_s"] = t.e2e_p99_s;
  j["slo_attainment"] = t.slo_attainment;
  j["mean_running_per_replica"] = t.mean_running_per_replica;
  j["finished"] = t.finished;
  j["rejected"] = t.rejected;
  return j;
}

ojson result_json(const SizeResult& r) {
  const bool ran = !r.trials.empty();
  const auto measured = [&](double v) { return ran ? ojson(v) : ojson(nullptr); };
  ojson j;
  j["candidate_index"] = r.candidate.index;
  j["gpu"] = r.candidate.gpu;
  j["tp"] = r.candidate.tensor_parallel_size;
  j["kv_cache_dtype"] = r.kv_cache_dtype.empty() ? r.candidate.kv_cache_dtype : r.kv_cache_dtype;
  j["block_size"] = r.block_size;
  j["max_num_seqs"] = r.max_num_seqs;
  j["max_num_batched_tokens"] = r.max_num_batched_tokens;
  j["requested"] = {{"kv_cache_dtype", r.candidate.kv_cache_dtype},
                    {"block_size", opt_int(r.candidate.block_size)},
                    {"max_num_seqs", opt_int(r.candidate.max_num_seqs)}};
  j["num_gpu_blocks"] = r.num_gpu_blocks;
  j["replicas"] = r.replicas;
  j["gpus"] = r.gpus();
  j["price_per_gpu_hour"] = r.price_per_gpu_hour;
  j["cost_per_hour"] = r.cost_per_hour;
  j["feasible"] = r.feasible();
  j["verdict"] = std::string(to_string(r.verdict));
  j["reason"] = r.reason;
  j["ttft_p99_s"] = measured(r.reported.ttft_p99_s);
  j["tpot_p99_s"] = measured(r.reported.tpot_p99_s);
  j["e2e_p99_s"] = measured(r.reported.e2e_p99_s);
  j["slo_attainment"] = measured(r.reported.slo_attainment);
  j["stopped_early"] = r.reported.stopped_early;
  j["mean_running_per_replica"] = measured(r.reported.mean_running_per_replica);
  j["formula_max_concurrency"] = r.formula_max_concurrency;
  j["vllm_max_concurrency"] = r.vllm_max_concurrency;
  j["replay_command"] = r.replay_command;
  ojson trials = ojson::array();
  for (const SizeTrial& t : r.trials) trials.push_back(trial_json(t));
  j["trials"] = std::move(trials);
  return j;
}

// ---- Reading back ----

// Field access that names the file and the candidate on a missing or mistyped field.
struct Reader {
  const std::string& file;
  std::string where;  // "candidate 3" or "the report"

  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw std::invalid_argument(fmt::format("{}: {}: field '{}' {}", file, where, key, why));
  }
  const nlohmann::json& at(const nlohmann::json& j, const std::string& key) const {
    if (!j.is_object() || !j.contains(key)) fail(key, "is missing");
    return j.at(key);
  }
  template <typename T>
  T integer(const nlohmann::json& j, const std::string& key) const {
    const nlohmann::json& v = at(j, key);
    if (!v.is_number_integer()) fail(key, "must be an integer");
    const auto x = v.get<int64_t>();
    if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) {
      fail(key, "is out of range");
    }
    return static_cast<T>(x);
  }
  double number(const nlohmann::json& j, const std::string& key) const {
    const nlohmann::json& v = at(j, key);
    if (!v.is_number()) fail(key, "must be a number");
    return v.get<double>();
  }
  std::optional<double> opt_number(const nlohmann::json& j, const std::string& key) const {
    if (at(j, key).is_null()) return std::nullopt;
    return number(j, key);
  }
  template <typename T>
  std::optional<T> opt_integer(const nlohmann::json& j, const std::string& key) const {
    if (at(j, key).is_null()) return std::nullopt;
    return integer<T>(j, key);
  }
  bool boolean(const nlohmann::json& j, const std::string& key) const {
    const nlohmann::json& v = at(j, key);
    if (!v.is_boolean()) fail(key, "must be true or false");
    return v.get<bool>();
  }
  std::string string(const nlohmann::json& j, const std::string& key) const {
    const nlohmann::json& v = at(j, key);
    if (!v.is_string()) fail(key, "must be a string");
    return v.get<std::string>();
  }
};

SizeVerdict parse_verdict(const Reader& rd, const std::string& s) {
  for (SizeVerdict v : {SizeVerdict::FEASIBLE, SizeVerdict::SLO_UNREACHABLE,
                        SizeVerdict::DOES_NOT_FIT, SizeVerdict::INVALID}) {
    if (to_string(v) == s) return v;
  }
  rd.fail("verdict", fmt::format("has unknown value '{}'", s));
}

SizeTrial read_trial(const Reader& rd, const nlohmann::json& j) {
  SizeTrial t;
  t.replicas = rd.integer<int32_t>(j, "replicas");
  t.meets_slo = rd.boolean(j, "meets_slo");
  t.stopped_early = rd.boolean(j, "stopped_early");
  t.ttft_p99_s = rd.number(j, "ttft_p99_s");
  t.tpot_p99_s = rd.number(j, "tpot_p99_s");
  t.e2e_p99_s = rd.number(j, "e2e_p99_s");
  t.slo_attainment = rd.number(j, "slo_attainment");
  t.mean_running_per_replica = rd.number(j, "mean_running_per_replica");
  t.finished = rd.integer<int64_t>(j, "finished");
  t.rejected = rd.integer<int64_t>(j, "rejected");
  return t;
}

SizeResult read_result(const std::string& file, const nlohmann::json& j, size_t position) {
  Reader rd{file, fmt::format("candidates[{}]", position)};
  SizeResult r;
  r.candidate.index = rd.integer<int64_t>(j, "candidate_index");
  rd.where = fmt::format("candidate {}", r.candidate.index);
  r.candidate.gpu = rd.string(j, "gpu");
  r.candidate.tensor_parallel_size = rd.integer<int32_t>(j, "tp");
  const nlohmann::json& req = rd.at(j, "requested");
  r.candidate.kv_cache_dtype = rd.string(req, "kv_cache_dtype");
  r.candidate.block_size = rd.opt_integer<int32_t>(req, "block_size");
  r.candidate.max_num_seqs = rd.opt_integer<int32_t>(req, "max_num_seqs");
  r.verdict = parse_verdict(rd, rd.string(j, "verdict"));
  r.reason = rd.string(j, "reason");
  r.block_size = rd.integer<int32_t>(j, "block_size");
  r.max_num_seqs = rd.integer<int32_t>(j, "max_num_seqs");
  r.max_num_batched_tokens = rd.integer<int32_t>(j, "max_num_batched_tokens");
  // Written as the candidate's own dtype when the candidate was never planned.
  const std::string dtype = rd.string(j, "kv_cache_dtype");
  const bool planned =
      r.verdict == SizeVerdict::FEASIBLE || r.verdict == SizeVerdict::SLO_UNREACHABLE;
  r.kv_cache_dtype = planned ? dtype : "";
  r.num_gpu_blocks = rd.integer<int64_t>(j, "num_gpu_blocks");
  r.replicas = rd.integer<int32_t>(j, "replicas");
  if (const auto gpus = rd.integer<int64_t>(j, "gpus"); gpus != r.gpus()) {
    rd.fail("gpus", fmt::format("is {}, not replicas {} x tp {} = {}", gpus, r.replicas,
                                r.candidate.tensor_parallel_size, r.gpus()));
  }
  r.price_per_gpu_hour = rd.number(j, "price_per_gpu_hour");
  r.cost_per_hour = rd.number(j, "cost_per_hour");
  r.formula_max_concurrency = rd.integer<int64_t>(j, "formula_max_concurrency");
  r.vllm_max_concurrency = rd.number(j, "vllm_max_concurrency");
  r.replay_command = rd.string(j, "replay_command");
  const nlohmann::json& trials = rd.at(j, "trials");
  if (!trials.is_array()) rd.fail("trials", "must be a list");
  for (const nlohmann::json& t : trials) r.trials.push_back(read_trial(rd, t));
  if (!r.trials.empty()) {
    // The reported trial is one of the trials: take it whole (finished, rejected, verdict).
    bool found = false;
    for (const SizeTrial& t : r.trials) {
      if (t.replicas == r.replicas) {
        r.reported = t;
        found = true;
      }
    }
    if (!found) rd.fail("trials", fmt::format("has no trial at replicas {}", r.replicas));
  }
  if (rd.boolean(j, "feasible") != r.feasible() || r.feasible() != r.reason.empty()) {
    rd.fail("feasible", "disagrees with 'verdict' / 'reason'");
  }
  return r;
}

SizeReportContext read_context(const std::string& file, const nlohmann::json& j) {
  Reader rd{file, "the report"};
  SizeReportContext c;
  const std::string id = rd.string(j, "size_id");
  size_t used = 0;
  try {
    if (id.size() != 16) throw std::invalid_argument("length");
    c.size_id = std::stoull(id, &used, 16);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != 16) rd.fail("size_id", "must be 16 hex digits");
  c.num_candidates = rd.integer<int64_t>(j, "num_candidates");
  c.trace = rd.string(j, "trace");
  c.requests = rd.integer<int64_t>(j, "requests");
  c.model = rd.string(j, "model");
  c.router = rd.string(j, "router");
  c.max_replicas = rd.integer<int32_t>(j, "max_replicas");
  const nlohmann::json& slo = rd.at(j, "slo");
  c.slo.ttft_s = rd.opt_number(slo, "ttft_p99_s");
  c.slo.tpot_s = rd.opt_number(slo, "tpot_p99_s");
  c.slo.e2e_s = rd.opt_number(slo, "e2e_p99_s");
  return c;
}

}  // namespace

std::string size_json(const SizeReportContext& ctx, std::span<const SizeResult> results) {
  ojson j;
  j["size_id"] = fmt::format("{:016x}", ctx.size_id);
  j["num_candidates"] = ctx.num_candidates;
  j["trace"] = ctx.trace;
  j["requests"] = ctx.requests;
  j["model"] = ctx.model;
  j["router"] = ctx.router;
  j["max_replicas"] = ctx.max_replicas;
  j["slo"] = {{"ttft_p99_s", opt_number(ctx.slo.ttft_s)},
              {"tpot_p99_s", opt_number(ctx.slo.tpot_s)},
              {"e2e_p99_s", opt_number(ctx.slo.e2e_s)}};
  int64_t feasible = 0;
  for (const SizeResult& r : results) feasible += r.feasible() ? 1 : 0;
  j["feasible"] = feasible;
  ojson list = ojson::array();
  for (const SizeResult& r : results) list.push_back(result_json(r));
  j["candidates"] = std::move(list);
  return j.dump(2) + "\n";
}

SizeMerge merge_size_reports(std::span<const NamedText> shards) {
  if (shards.empty()) throw std::invalid_argument(param("merge") + ": no shard files given");
  SizeMerge m;
  std::set<int64_t> seen;
  std::map<int64_t, std::string> file_of;  // candidate index -> its shard, for messages
  for (size_t s = 0; s < shards.size(); ++s) {
    const NamedText& shard = shards[s];
    nlohmann::json j;
    try {
      j = parse_strict_json(shard.text, shard.name);
    } catch (const JsonInputError& e) {
      throw std::invalid_argument(e.what());  // one error type for every bad shard
    }
    if (!j.is_object()) {
      throw std::invalid_argument(fmt::format("{}: not a kvsim size JSON report", shard.name));
    }
    const SizeReportContext ctx = read_context(shard.name, j);
    if (s == 0) {
      m.context = ctx;
    } else if (const std::string diff = size_context_difference(ctx, m.context); !diff.empty()) {
      throw std::invalid_argument(fmt::format("{}: a shard of a different search than {}: {}",
                                              shard.name, shards[0].name, diff));
    }
    const Reader rd{shard.name, "the report"};
    const nlohmann::json& list = rd.at(j, "candidates");
    if (!list.is_array()) rd.fail("candidates", "must be a list");
    int64_t feasible = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      SizeResult r = read_result(shard.name, list[i], i);
      check_size_candidate(shard.name, ctx, r);
      feasible += r.feasible() ? 1 : 0;
      if (r.candidate.index < 0 || r.candidate.index >= ctx.num_candidates) {
        throw std::invalid_argument(fmt::format("{}: candidate index {} outside 0..{}", shard.name,
                                                r.candidate.index, ctx.num_candidates - 1));
      }
      if (!seen.insert(r.candidate.index).second) {
        throw std::invalid_argument(fmt::format("{}: candidate {} appears in more than one shard",
                                                shard.name, r.candidate.index));
      }
      file_of[r.candidate.index] = shard.name;
      m.results.push_back(std::move(r));
    }
    if (const auto said = rd.integer<int64_t>(j, "feasible"); said != feasible) {
      rd.fail("feasible",
              fmt::format("is {}, but {} of its candidates are feasible", said, feasible));
    }
  }
  if (static_cast<int64_t>(seen.size()) != m.context.num_candidates) {
    int64_t missing = 0;
    while (seen.contains(missing)) ++missing;
    throw std::invalid_argument(fmt::format(
        "{}: the shards hold {} of {} candidates (candidate {} is missing: a shard was not given "
        "or did not finish)",
        param("merge"), seen.size(), m.context.num_candidates, missing));
  }
  check_size_candidates_agree(m.results, file_of, m.context.router);
  rank_size_results(m.results);
  return m;
}

}  // namespace kvsim
