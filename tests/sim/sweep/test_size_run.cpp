// kvsim size over candidates with a fake runner: candidate grid, prices, cost, ranking, --jobs
// independence, and the shard -> JSON -> merge round trip (byte-identical outputs).
#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kvsim/core/model_presets.h"
#include "kvsim/core/param.h"
#include "kvsim/sim/sweep/size.h"
#include "kvsim/sim/sweep/size_report.h"

namespace kvsim {
namespace {

SizeAxes three_cards() {
  SizeAxes a;
  a.gpus = {"l40s", "H100-80G", "h200-141g"};
  a.tensor_parallel_sizes = {1, 2, 4};
  a.kv_cache_dtypes = {"auto", "fp8"};
  return a;
}

// A deterministic stand-in for the cluster replay: a card of `speed` s needs ceil(demand / (tp *
// speed)) replicas (fp8 doubles the capacity); l40s at TP 1 does not fit; TP 4 on l40s is
// "invalid".
CandidateSetup fake_runner(const SizeCandidate& c) {
  CandidateSetup s;
  if (c.gpu == "l40s" && c.tensor_parallel_size == 1) {
    s.does_not_fit = true;
    s.infeasible_reason = "does not fit: model 'x' does not fit on 'l40s': KV budget = -3 GiB";
    return s;
  }
  if (c.gpu == "l40s" && c.tensor_parallel_size == 4) {
    s.infeasible_reason = "invalid: 4 does not divide 6 heads";
    return s;
  }
  const double speed = c.gpu == "l40s" ? 1.0 : c.gpu == "h100-80g" ? 3.0 : 4.0;
  const double capacity = speed * c.tensor_parallel_size * (c.kv_cache_dtype == "fp8" ? 2 : 1);
  const auto need = static_cast<int32_t>(std::ceil(24.0 / capacity));
  s.block_size = c.block_size.value_or(16);
  s.max_num_seqs = c.max_num_seqs.value_or(256);
  s.max_num_batched_tokens = 8192;
  s.kv_cache_dtype = c.kv_cache_dtype == "auto" ? "bfloat16" : c.kv_cache_dtype;
  s.num_gpu_blocks = 1000 * c.tensor_parallel_size;
  s.formula_max_concurrency = 40 * c.tensor_parallel_size;
  s.vllm_max_concurrency = 39.5 * c.tensor_parallel_size;
  s.run = [need, capacity](int32_t n) {
    SizeTrial t;
    t.meets_slo = n >= need;
    t.stopped_early = !t.meets_slo;
    t.ttft_p99_s = 2.0 / (n * capacity);
    t.tpot_p99_s = 0.01 + 0.1 / (n * capacity);
    t.e2e_p99_s = 5.0 / (n * capacity);
    t.slo_attainment = std::min(1.0, n / static_cast<double>(need));
    t.mean_running_per_replica = 24.0 / n + 0.125;
    t.finished = 100;
    return t;
  };
  return s;
}

SizeReportContext context(int64_t num_candidates) {
  SizeReportContext c;
  c.trace = "traces/x.csv";
  c.requests = 100;
  c.model = "llama-3.1-8b";
  c.slo.ttft_s = 1.5;
  c.slo.tpot_s = 0.05;
  c.router = "round-robin";
  c.max_replicas = 16;
  c.num_candidates = num_candidates;
  c.size_id = 0x0123456789abcdefULL;
  return c;
}

std::vector<SizeResult> ranked(const std::vector<SizeCandidate>& cands, int32_t jobs,
                               ShardSpec shard = {}) {
  SizeSearchOptions o;
  o.max_replicas = 16;
  o.jobs = jobs;
  o.shard = shard;
  std::vector<SizeResult> r = run_size(cands, fake_runner, default_gpu_prices(), o);
  for (SizeResult& x : r) {
    if (!x.trials.empty()) {
      x.replay_command = size_replay_command("kvsim replay t.csv", "round-robin", x);
    }
  }
  rank_size_results(r);
  return r;
}

TEST(SizeCandidates, GridOrderAndCanonicalNames) {
  const auto c = expand_size_candidates(three_cards());
  ASSERT_EQ(c.size(), 18u);
  EXPECT_EQ(c[0].describe(), "l40s tp=1 kv=auto");
  EXPECT_EQ(c[1].describe(), "l40s tp=1 kv=fp8");
  EXPECT_EQ(c[6].gpu, "h100-80g");  // canonical lower-case name
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].index, static_cast<int64_t>(i));
    EXPECT_EQ(c[i].group, static_cast<int64_t>(i / 2));  // (gpu, TP) pairs; 2 dtypes each
  }
  SizeAxes a = three_cards();
  a.block_sizes = {16, 32};
  a.max_num_seqs = {64, 128};
  const auto d = expand_size_candidates(a);
  ASSERT_EQ(d.size(), 72u);
  EXPECT_EQ(d[3].describe(), "l40s tp=1 kv=auto bs=32 seqs=128");
}

TEST(SizeCandidates, BadAxesNameTheFlag) {
  const auto error = [](SizeAxes a) {
    try {
      expand_size_candidates(a);
    } catch (const std::invalid_argument& e) {
      return spell_params(e.what(), ParamSpelling::kCli);
    }
    return std::string("no error");
  };
  SizeAxes a = three_cards();
  a.gpus = {"h100-80g", "tpu"};
  EXPECT_NE(error(a).find("--gpus: unknown gpu 'tpu' (known: rtx4090"), std::string::npos)
      << error(a);
  a = three_cards();
  a.gpus = {"h100-80g", "H100-80g"};
  EXPECT_EQ(error(a), "--gpus: value h100-80g given twice");
  a = three_cards();
  a.tensor_parallel_sizes = {1, 0};
  EXPECT_EQ(error(a), "--tp: values must be > 0, got 0");
  a.tensor_parallel_sizes = {};
  EXPECT_EQ(error(a), "--tp: at least one tensor-parallel size is required");
  a = three_cards();
  a.tensor_parallel_sizes = {2, 2};
  EXPECT_EQ(error(a), "--tp: value 2 given twice");
  a = three_cards();
  a.gpus = {};
  EXPECT_EQ(error(a), "--gpus: at least one GPU is required");
  a = three_cards();
  a.max_num_seqs = {-1};
  EXPECT_EQ(error(a), "--max-num-seqs: values must be > 0, got -1");
}

TEST(SizePrices, DefaultPricesAreForPresets) {
  const PriceTable prices = default_gpu_prices();
  for (const auto& [name, usd] : prices) {
    EXPECT_EQ(find_gpu_preset(name).name, name);
    EXPECT_GT(usd, 0.0) << name;
  }
  // The eleven original presets are priced; the cards added later (b200, mi355x, ...) have no
  // written-down price and need --gpu-price (docs/size.md).
  for (size_t i = 0; i < 11; ++i) {
    EXPECT_TRUE(prices.contains(gpu_presets()[i].name)) << gpu_presets()[i].name;
  }
  EXPECT_EQ(prices.size(), 11U);
}

TEST(SizePrices, OverridesAndBadPrices) {
  PriceTable p = default_gpu_prices();
  apply_gpu_price(p, "H100-80G=2.49");
  EXPECT_DOUBLE_EQ(p.at("h100-80g"), 2.49);
  const auto error = [&](const char* text) {
    try {
      apply_gpu_price(p, text);
    } catch (const std::invalid_argument& e) {
      return spell_params(e.what(), ParamSpelling::kCli);
    }
    return std::string("no error");
  };
  EXPECT_NE(error("tpu=5").find("--gpu-price 'tpu=5': unknown gpu 'tpu' (known: "),
            std::string::npos);
  EXPECT_EQ(error("h100-80g"),
            "--gpu-price 'h100-80g': expected NAME=USD_PER_GPU_HOUR, e.g. h100-80g=2.49");
  EXPECT_EQ(error("h100-80g=0"), "--gpu-price 'h100-80g=0': price '0' is not a number > 0");
  EXPECT_EQ(error("h100-80g=-1"), "--gpu-price 'h100-80g=-1': price '-1' is not a number > 0");
  EXPECT_EQ(error("h100-80g=inf"), "--gpu-price 'h100-80g=inf': price 'inf' is not a number > 0");
  EXPECT_EQ(error("h100-80g="), "--gpu-price 'h100-80g=': price '' is not a number > 0");
}

TEST(SizeRun, CostRankingAndVerdicts) {
  const auto cands = expand_size_candidates(three_cards());
  const std::vector<SizeResult> r = ranked(cands, 1);
  ASSERT_EQ(r.size(), cands.size());
  const PriceTable prices = default_gpu_prices();
  size_t feasible = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    const SizeResult& x = r[i];
    if (x.feasible()) {
      ++feasible;
      EXPECT_TRUE(x.reason.empty());
      EXPECT_TRUE(x.reported.meets_slo);
      EXPECT_EQ(x.reported.replicas, x.replicas);
      EXPECT_DOUBLE_EQ(x.cost_per_hour,
                       x.replicas * x.candidate.tensor_parallel_size * prices.at(x.candidate.gpu));
      if (i > 0) {
        ASSERT_TRUE(r[i - 1].feasible());  // feasible ones come first, cheapest first
        EXPECT_LE(r[i - 1].cost_per_hour, x.cost_per_hour);
      }
    }
  }
  // l40s at TP 1 (2 dtypes) does not fit, at TP 4 is invalid; the other 14 are feasible.
  EXPECT_EQ(feasible, 14u);
  EXPECT_EQ(r[14].verdict, SizeVerdict::DOES_NOT_FIT);
  EXPECT_EQ(r[15].verdict, SizeVerdict::DOES_NOT_FIT);
  EXPECT_EQ(r[16].verdict, SizeVerdict::INVALID);
  EXPECT_EQ(r[14].replicas, 0);
  EXPECT_TRUE(r[14].trials.empty());
  EXPECT_EQ(r[14].kv_cache_dtype, "");  // nothing resolved
  // Cheapest: h200-141g fp8 (capacity 8 per GPU, 3.79/GPU-hour) at TP 1: 3 replicas = 11.37;
  // then h100-80g fp8 (capacity 6, 2.99) at TP 1: 4 replicas = 11.96.
  EXPECT_EQ(r[0].candidate.describe(), "h200-141g tp=1 kv=fp8");
  EXPECT_EQ(r[0].replicas, 3);
  EXPECT_DOUBLE_EQ(r[0].cost_per_hour, 3 * 3.79);
  EXPECT_DOUBLE_EQ(r[0].reported.mean_running_per_replica, 8.125);
  EXPECT_EQ(r[1].candidate.describe(), "h100-80g tp=1 kv=fp8");
  EXPECT_DOUBLE_EQ(r[1].cost_per_hour, 4 * 2.99);
}

TEST(SizeRun, UnreachableAtMaxReplicas) {
  SizeAxes a;
  a.gpus = {"l40s"};
  a.tensor_parallel_sizes = {2};
  SizeSearchOptions o;
  o.max_replicas = 8;  // l40s TP 2 bf16 needs 12
  const auto r = run_size(expand_size_candidates(a), fake_runner, default_gpu_prices(), o);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].verdict, SizeVerdict::SLO_UNREACHABLE);
  EXPECT_EQ(r[0].reason, "SLO unreachable at --max-replicas 8");
  EXPECT_EQ(r[0].replicas, 8);
  EXPECT_EQ(r[0].reported.replicas, 8);
  EXPECT_DOUBLE_EQ(r[0].cost_per_hour, 8 * 2 * 1.79);
}

// The reason is result data: written in the spelling of the front end that shows it, the
// planner's refusal included.
TEST(SizeRun, ReasonsNameParametersInTheFrontEndsSpelling) {
  SizeAxes a;
  a.gpus = {"l40s"};
  a.tensor_parallel_sizes = {1, 2};
  SizeSearchOptions o;
  o.max_replicas = 8;
  o.spelling = ParamSpelling::kPython;
  const SizeRunner runner = [](const SizeCandidate& c) {
    if (c.tensor_parallel_size == 2) return fake_runner(c);
    CandidateSetup s;
    s.infeasible_reason = "invalid: " + param("block_size") + " must be in [1, 1048576] (got 0)";
    return s;
  };
  const auto r = run_size(expand_size_candidates(a), runner, default_gpu_prices(), o);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].reason, "invalid: block_size= must be in [1, 1048576] (got 0)");
  EXPECT_EQ(r[1].reason, "SLO unreachable at max_replicas=8");
  o.spelling = ParamSpelling::kCli;
  EXPECT_EQ(run_size(expand_size_candidates(a), runner, default_gpu_prices(), o)[0].reason,
            "invalid: --block-size must be in [1, 1048576] (got 0)");
}

TEST(SizeRun, MissingPriceAndBadOptions) {
  const auto cands = expand_size_candidates(three_cards());
  PriceTable p = default_gpu_prices();
  p.erase("h200-141g");
  try {
    run_size(cands, fake_runner, p, {});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no price for GPU 'h200-141g'"), std::string::npos)
        << e.what();
  }
  SizeSearchOptions o;
  o.max_replicas = 0;
  EXPECT_THROW(run_size(cands, fake_runner, default_gpu_prices(), o), std::invalid_argument);
  o.max_replicas = 4;
  o.jobs = 0;
  EXPECT_THROW(run_size(cands, fake_runner, default_gpu_prices(), o), std::invalid_argument);
}

TEST(SizeRun, OutputDoesNotDependOnJobs) {
  SizeAxes a = three_cards();
  a.max_num_seqs = {64, 128, 256};
  const auto cands = expand_size_candidates(a);
  const auto ctx = context(static_cast<int64_t>(cands.size()));
  const std::string one = size_json(ctx, ranked(cands, 1));
  EXPECT_EQ(size_json(ctx, ranked(cands, 2)), one);
  EXPECT_EQ(size_json(ctx, ranked(cands, 7)), one);
}

TEST(SizeReport, JsonHasTheDocumentedFields) {
  const auto cands = expand_size_candidates(three_cards());
  const auto j = nlohmann::json::parse(size_json(context(18), ranked(cands, 1)));
  EXPECT_EQ(j.at("feasible"), 14);
  ASSERT_EQ(j.at("candidates").size(), 18u);
  const auto& c = j.at("candidates")[0];
  for (const char* key :
       {"gpu", "tp", "kv_cache_dtype", "block_size", "max_num_seqs", "replicas", "cost_per_hour",
        "feasible", "reason", "ttft_p99_s", "tpot_p99_s", "mean_running_per_replica",
        "formula_max_concurrency", "replay_command", "trials"}) {
    EXPECT_TRUE(c.contains(key)) << key;
  }
  EXPECT_EQ(c.at("gpu"), "h200-141g");
  EXPECT_EQ(c.at("kv_cache_dtype"), "fp8");
  EXPECT_EQ(c.at("feasible"), true);
  EXPECT_EQ(c.at("replay_command"),
            "kvsim replay t.csv --gpu h200-141g --tensor-parallel-size 1 --kv-cache-dtype fp8 "
            "--replicas 3 --router round-robin");
  const auto& dnf = j.at("candidates")[14];
  EXPECT_EQ(dnf.at("feasible"), false);
  EXPECT_TRUE(dnf.at("ttft_p99_s").is_null());
  EXPECT_EQ(dnf.at("reason").get<std::string>().rfind("does not fit: ", 0), 0u);
}

TEST(SizeReport, ShardsMergeByteIdentical) {
  SizeAxes a = three_cards();
  a.block_sizes = {16, 32};
  const auto cands = expand_size_candidates(a);
  const auto ctx = context(static_cast<int64_t>(cands.size()));
  const auto whole = ranked(cands, 2);
  const std::string json = size_json(ctx, whole);
  const std::string csv = size_csv(whole);
  const std::string table = format_size_table(ctx, whole);
  for (int64_t n : {1, 2, 5}) {
    std::vector<NamedText> shards;
    for (int64_t i = 0; i < n; ++i) {
      shards.push_back(
          {"shard" + std::to_string(i) + ".json", size_json(ctx, ranked(cands, 1, {i, n}))});
    }
    std::reverse(shards.begin(), shards.end());  // order of the files does not matter
    const SizeMerge m = merge_size_reports(shards);
    EXPECT_EQ(size_json(m.context, m.results), json) << n;
    EXPECT_EQ(size_csv(m.results), csv) << n;
    EXPECT_EQ(format_size_table(m.context, m.results), table) << n;
  }
}

TEST(SizeReport, MergeRefusesMissingDuplicateAndForeignShards) {
  const auto cands = expand_size_candidates(three_cards());
  const auto ctx = context(18);
  const std::string s0 = size_json(ctx, ranked(cands, 1, {0, 2}));
  const std::string s1 = size_json(ctx, ranked(cands, 1, {1, 2}));
  const auto error = [](std::vector<NamedText> shards) {
    try {
      merge_size_reports(shards);
    } catch (const std::invalid_argument& e) {
      return spell_params(e.what(), ParamSpelling::kCli);
    }
    return std::string("no error");
  };
  EXPECT_EQ(error({{"a.json", s0}}),
            "--merge: the shards hold 10 of 18 candidates (candidate 2 is missing: a shard was "
            "not given or did not finish)");
  EXPECT_NE(error({{"a.json", s0}, {"b.json", s0}}).find("appears in more than one shard"),
            std::string::npos);
  SizeReportContext other = ctx;
  other.size_id = 42;
  const std::string foreign = size_json(other, ranked(cands, 1, {1, 2}));
  EXPECT_NE(error({{"a.json", s0}, {"b.json", foreign}})
                .find("b.json: a shard of a different "
                      "search than a.json"),
            std::string::npos);
  EXPECT_NE(error({{"bad.json", "{\"size_id\": 1"}}).find("bad.json"), std::string::npos);
  std::string broken = s1;
  broken.replace(broken.find("\"tp\": "), 7, "\"tp\": \"1\"");
  EXPECT_NE(error({{"a.json", s0}, {"b.json", broken}}).find("b.json: candidate"),
            std::string::npos)
      << error({{"a.json", s0}, {"b.json", broken}});
}

// The shard JSON with `edit` applied to its first feasible candidate (and the report).
std::string edited(const std::string& shard,
                   const std::function<void(nlohmann::ordered_json& report,
                                            nlohmann::ordered_json& candidate)>& edit) {
  auto j = nlohmann::ordered_json::parse(shard);
  for (auto& c : j.at("candidates")) {
    if (c.at("feasible").get<bool>()) {
      edit(j, c);
      return j.dump(2) + "\n";
    }
  }
  ADD_FAILURE() << "no feasible candidate";
  return shard;
}

std::string size_merge_error(const std::vector<NamedText>& shards) {
  try {
    merge_size_reports(shards);
  } catch (const std::invalid_argument& e) {
    return spell_params(e.what(), ParamSpelling::kCli);
  }
  return "no error";
}

// Issue 23: rows that contradict their own arithmetic, their report or the grid are refused.
TEST(SizeReport, MergeRefusesCandidatesThatContradictThemselves) {
  const auto cands = expand_size_candidates(three_cards());
  const auto ctx = context(18);
  const std::string s0 = size_json(ctx, ranked(cands, 1, {0, 2}));
  const std::string s1 = size_json(ctx, ranked(cands, 1, {1, 2}));
  using J = nlohmann::ordered_json;
  ASSERT_EQ(size_merge_error({{"a.json", s0}, {"b.json", s1}}), "no error");
  // cost != replicas x tp x price.
  std::string err = size_merge_error({{"a.json", s0}, {"b.json", edited(s1, [](J&, J& c) {
                                                         c["cost_per_hour"] =
                                                             c["cost_per_hour"].get<double>() * 2;
                                                       })}});
  EXPECT_NE(err.find("b.json: candidate "), std::string::npos) << err;
  EXPECT_NE(err.find("b.json: candidate 7: cost_per_hour 23.92 is not replicas 4 x tp 1 x "
                     "price_per_gpu_hour 2.99 = 11.96; the shard contradicts itself"),
            std::string::npos)
      << err;
  // gpus != replicas x tp.
  err = size_merge_error({{"a.json", s0}, {"b.json", edited(s1, [](J&, J& c) { c["gpus"] = 7; })}});
  EXPECT_NE(err.find("b.json: candidate 7: field 'gpus' is 7, not replicas 4 x tp 1 = 4"),
            std::string::npos)
      << err;
  // Another price for the same GPU (cost kept consistent with it).
  err = size_merge_error({{"a.json", s0}, {"b.json", edited(s1, [](J&, J& c) {
                                             c["price_per_gpu_hour"] = 1.0;
                                             c["cost_per_hour"] = c["gpus"].get<double>();
                                           })}});
  EXPECT_NE(err.find("price_per_gpu_hour 1 for h100-80g, but candidate "), std::string::npos)
      << err;
  // A GPU renamed: the replay command no longer replays it; renamed there too, the candidates no
  // longer form the grid.
  const auto rename = [](bool command) {
    return [command](J&, J& c) {
      c["gpu"] = "a100-80g";
      if (command) {
        std::string cmd = c["replay_command"];
        cmd.replace(cmd.find("--gpu h100-80g"), 14, "--gpu a100-80g");
        c["replay_command"] = cmd;
      }
    };
  };
  err = size_merge_error({{"a.json", s0}, {"b.json", edited(s1, rename(false))}});
  EXPECT_NE(err.find("replay_command does not replay it (expected 'kvsim replay ... --gpu "
                     "a100-80g --tensor-parallel-size 1 --kv-cache-dtype fp8 --replicas 4 --router "
                     "round-robin')"),
            std::string::npos)
      << err;
  err = size_merge_error({{"a.json", s0}, {"b.json", edited(s1, rename(true))}});
  EXPECT_NE(
      err.find("the candidates do not form a grid: gpu 'a100-80g' is on 1 candidate(s), gpu "),
      std::string::npos)
      << err;
  EXPECT_NE(err.find("b.json: candidate "), std::string::npos) << err;
  // The report's feasible count, and a trial beyond its max_replicas.
  err = size_merge_error(
      {{"a.json", s0}, {"b.json", edited(s1, [](J& report, J&) { report["feasible"] = 99; })}});
  EXPECT_NE(err.find("b.json: the report: field 'feasible' is 99, but 8 of its candidates are "
                     "feasible"),
            std::string::npos)
      << err;
  err = size_merge_error(
      {{"a.json", s0}, {"b.json", edited(s1, [](J&, J& c) { c["trials"][0]["replicas"] = 17; })}});
  EXPECT_NE(err.find("a trial at 17 replicas, outside the report's 1..max_replicas 16"),
            std::string::npos)
      << err;
}

TEST(SizeReport, MergeSaysWhatDiffersBetweenShardHeaders) {
  const auto cands = expand_size_candidates(three_cards());
  const auto ctx = context(18);
  const std::string s0 = size_json(ctx, ranked(cands, 1, {0, 2}));
  SizeReportContext other = ctx;
  other.size_id = 42;
  EXPECT_EQ(
      size_merge_error({{"a.json", s0}, {"b.json", size_json(other, ranked(cands, 1, {1, 2}))}}),
      "b.json: a shard of a different search than a.json: size_id 000000000000002a vs "
      "0123456789abcdef (the flags or the requests read differ)");
  // Same size_id, different header: printed "size_id X vs X" before; now names the field.
  other = ctx;
  other.trace = "traces/y.csv";
  other.max_replicas = 8;
  EXPECT_EQ(size_merge_error({{"a.json", s0}, {"b.json", size_json(other, {})}}),
            "b.json: a shard of a different search than a.json: the same size_id "
            "0123456789abcdef, yet trace 'traces/y.csv' vs 'traces/x.csv', max_replicas 8 vs 16 "
            "(a report header was edited?)");
}

TEST(SizeReport, TableListsInfeasibleWithReason) {
  const auto cands = expand_size_candidates(three_cards());
  const std::string t = format_size_table(context(18), ranked(cands, 1));
  EXPECT_NE(t.find("infeasible:"), std::string::npos);
  EXPECT_NE(t.find("does not fit: model 'x'"), std::string::npos);
  EXPECT_NE(t.find("invalid: 4 does not divide 6 heads"), std::string::npos);
  EXPECT_NE(t.find("14 of 18 candidates feasible"), std::string::npos);
  EXPECT_LT(t.find("h100-80g"), t.find("infeasible:"));
}

}  // namespace
}  // namespace kvsim
