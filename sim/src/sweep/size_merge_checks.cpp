// kvsim size --merge: consistency of the candidates read back from shard reports.
#include "size_merge_checks.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "kvsim/core/param.h"

namespace kvsim {
namespace {

[[noreturn]] void contradiction(const std::string& file, int64_t index, const std::string& what) {
  throw std::invalid_argument(fmt::format(
      "{}: candidate {}: {}; the shard contradicts itself (edited or corrupt), refusing to merge",
      file, index, what));
}

// The replay command's tail after the shared prefix, with the router left off:
// " --gpu G --tensor-parallel-size T --kv-cache-dtype D [...] --replicas N --router ".
std::string replay_tail(const SizeResult& r) {
  return size_replay_command("", "", r);
}

// The candidate's requested settings, one string per grid axis in grid order.
constexpr std::array<const char*, 5> kAxes = {"gpu", "tp", "kv_cache_dtype", "block_size",
                                              "max_num_seqs"};
std::array<std::string, 5> axis_values(const SizeCandidate& c) {
  const auto opt = [](const std::optional<int32_t>& v) {
    return v ? std::to_string(*v) : std::string("default");
  };
  return {c.gpu, std::to_string(c.tensor_parallel_size), c.kv_cache_dtype, opt(c.block_size),
          opt(c.max_num_seqs)};
}

}  // namespace

void check_size_candidate(const std::string& file, const SizeReportContext& ctx,
                          const SizeResult& r) {
  const int64_t i = r.candidate.index;
  const auto fail = [&](const std::string& what) { contradiction(file, i, what); };
  if (!(r.price_per_gpu_hour > 0) || !std::isfinite(r.price_per_gpu_hour)) {
    fail(fmt::format("price_per_gpu_hour {} is not a price > 0", r.price_per_gpu_hour));
  }
  // Written as exactly this product, and JSON numbers round-trip exactly.
  const double cost = static_cast<double>(r.gpus()) * r.price_per_gpu_hour;
  if (r.cost_per_hour != cost) {
    fail(fmt::format("cost_per_hour {} is not replicas {} x tp {} x price_per_gpu_hour {} = {}",
                     r.cost_per_hour, r.replicas, r.candidate.tensor_parallel_size,
                     r.price_per_gpu_hour, cost));
  }
  const bool planned =
      r.verdict == SizeVerdict::FEASIBLE || r.verdict == SizeVerdict::SLO_UNREACHABLE;
  const std::string verdict(to_string(r.verdict));
  if (!planned) {
    if (r.replicas != 0 || !r.trials.empty() || !r.replay_command.empty() || r.block_size != 0 ||
        r.max_num_seqs != 0 || r.num_gpu_blocks != 0) {
      fail(fmt::format(
          "verdict '{}' (never replayed) with replicas, trials, a replay command or a resolved "
          "configuration",
          verdict));
    }
    return;
  }
  if (r.trials.empty()) fail(fmt::format("verdict '{}' without trials", verdict));
  std::set<int32_t> counts;
  for (const SizeTrial& t : r.trials) {
    if (t.replicas < 1 || t.replicas > ctx.max_replicas) {
      fail(fmt::format("a trial at {} replicas, outside the report's 1..max_replicas {}",
                       t.replicas, ctx.max_replicas));
    }
    if (!counts.insert(t.replicas).second) {
      fail(fmt::format("two trials at {} replicas (the search never repeats a count)", t.replicas));
    }
    if (t.stopped_early && t.meets_slo) {
      fail(fmt::format("the trial at {} replicas stopped early yet meets the SLO", t.replicas));
    }
  }
  if (r.verdict == SizeVerdict::FEASIBLE && !r.reported.meets_slo) {
    fail(fmt::format("feasible at {} replicas, but that trial does not meet the SLO", r.replicas));
  }
  if (r.verdict == SizeVerdict::SLO_UNREACHABLE) {
    if (r.replicas != ctx.max_replicas) {
      fail(fmt::format("slo_unreachable at {} replicas, not the report's max_replicas {}",
                       r.replicas, ctx.max_replicas));
    }
    for (const SizeTrial& t : r.trials) {
      if (t.meets_slo) {
        fail(
            fmt::format("slo_unreachable, but the trial at {} replicas meets the SLO", t.replicas));
      }
    }
  }
  const SizeCandidate& c = r.candidate;
  if (c.block_size && *c.block_size != r.block_size) {
    fail(
        fmt::format("block_size {} where the candidate asked for {}", r.block_size, *c.block_size));
  }
  if (c.max_num_seqs && *c.max_num_seqs != r.max_num_seqs) {
    fail(fmt::format("max_num_seqs {} where the candidate asked for {}", r.max_num_seqs,
                     *c.max_num_seqs));
  }
  const std::string tail = replay_tail(r) + ctx.router;
  if (!r.replay_command.starts_with("kvsim replay ") || !r.replay_command.ends_with(tail)) {
    fail(fmt::format("replay_command does not replay it (expected 'kvsim replay ...{}')", tail));
  }
}

void check_size_candidates_agree(std::span<const SizeResult> results,
                                 const std::map<int64_t, std::string>& file_of,
                                 const std::string& router) {
  const auto file = [&](int64_t index) {
    const auto it = file_of.find(index);
    return it == file_of.end() ? param("merge") : it->second;
  };
  // One price per GPU and one replay-command prefix per search (both fingerprinted).
  std::map<std::string, const SizeResult*> price_of;
  const SizeResult* first_replayed = nullptr;
  std::string prefix;
  for (const SizeResult& r : results) {
    const auto [it, added] = price_of.emplace(r.candidate.gpu, &r);
    const SizeResult& p = *it->second;
    if (!added && p.price_per_gpu_hour != r.price_per_gpu_hour) {
      contradiction(file(r.candidate.index), r.candidate.index,
                    fmt::format("price_per_gpu_hour {} for {}, but candidate {} in {} has {}",
                                r.price_per_gpu_hour, r.candidate.gpu, p.candidate.index,
                                file(p.candidate.index), p.price_per_gpu_hour));
    }
    if (r.replay_command.empty()) continue;
    const std::string head =
        r.replay_command.substr(0, r.replay_command.size() - replay_tail(r).size() - router.size());
    if (first_replayed == nullptr) {
      first_replayed = &r;
      prefix = head;
    } else if (head != prefix) {
      contradiction(file(r.candidate.index), r.candidate.index,
                    fmt::format("replay_command starts '{}', but candidate {}'s in {} starts "
                                "'{}' (the shared flags differ)",
                                head, first_replayed->candidate.index,
                                file(first_replayed->candidate.index), prefix));
    }
  }

  // The grid: each axis's values in order of first appearance along the indices.
  std::vector<const SizeResult*> by_index;
  for (const SizeResult& r : results) by_index.push_back(&r);
  std::sort(by_index.begin(), by_index.end(), [](const SizeResult* a, const SizeResult* b) {
    return a->candidate.index < b->candidate.index;
  });
  std::array<std::vector<std::string>, kAxes.size()> axes;
  std::array<std::map<std::string, int64_t>, kAxes.size()> count;
  for (const SizeResult* r : by_index) {
    const auto v = axis_values(r->candidate);
    for (size_t a = 0; a < kAxes.size(); ++a) {
      if (count[a][v[a]]++ == 0) axes[a].push_back(v[a]);
    }
  }
  const auto n = static_cast<int64_t>(by_index.size());
  // In a grid every value of an axis is on the same number of candidates: name the rarest one.
  for (size_t a = 0; a < kAxes.size(); ++a) {
    const auto [lo, hi] =
        std::minmax_element(count[a].begin(), count[a].end(),
                            [](const auto& x, const auto& y) { return x.second < y.second; });
    if (lo->second == hi->second) continue;
    for (const SizeResult* r : by_index) {
      if (axis_values(r->candidate)[a] != lo->first) continue;
      contradiction(
          file(r->candidate.index), r->candidate.index,
          fmt::format("the candidates do not form a grid: {} '{}' is on {} candidate(s), {} '{}' "
                      "on {}",
                      kAxes[a], lo->first, lo->second, kAxes[a], hi->first, hi->second));
    }
  }
  int64_t product = 1;
  for (const auto& axis : axes) product *= static_cast<int64_t>(axis.size());
  if (product != n) {
    throw std::invalid_argument(fmt::format(
        "{}: the candidates' settings make {} combinations for {} candidates (edited or corrupt "
        "shards?)",
        param("merge"), product, n));
  }
  // Candidate i is at digit (i / stride) % size of each axis, gpu the most significant.
  for (const SizeResult* r : by_index) {
    const auto v = axis_values(r->candidate);
    int64_t stride = n;
    for (size_t a = 0; a < kAxes.size(); ++a) {
      const auto size = static_cast<int64_t>(axes[a].size());
      stride /= size;
      const std::string& want = axes[a][static_cast<size_t>((r->candidate.index / stride) % size)];
      if (v[a] != want) {
        contradiction(file(r->candidate.index), r->candidate.index,
                      fmt::format("{} '{}' where the grid has {} '{}' at this index", kAxes[a],
                                  v[a], kAxes[a], want));
      }
    }
  }
}

std::string size_context_difference(const SizeReportContext& a, const SizeReportContext& b) {
  const auto opt = [](const std::optional<double>& v) {
    return v ? fmt::format("{}", *v) : std::string("none");
  };
  std::vector<std::string> d;
  if (a.num_candidates != b.num_candidates) {
    d.push_back(fmt::format("num_candidates {} vs {}", a.num_candidates, b.num_candidates));
  }
  if (a.trace != b.trace) d.push_back(fmt::format("trace '{}' vs '{}'", a.trace, b.trace));
  if (a.requests != b.requests)
    d.push_back(fmt::format("requests {} vs {}", a.requests, b.requests));
  if (a.model != b.model) d.push_back(fmt::format("model '{}' vs '{}'", a.model, b.model));
  if (a.router != b.router) d.push_back(fmt::format("router '{}' vs '{}'", a.router, b.router));
  if (a.max_replicas != b.max_replicas) {
    d.push_back(fmt::format("max_replicas {} vs {}", a.max_replicas, b.max_replicas));
  }
  if (a.slo.ttft_s != b.slo.ttft_s) {
    d.push_back(fmt::format("SLO ttft_p99_s {} vs {}", opt(a.slo.ttft_s), opt(b.slo.ttft_s)));
  }
  if (a.slo.tpot_s != b.slo.tpot_s) {
    d.push_back(fmt::format("SLO tpot_p99_s {} vs {}", opt(a.slo.tpot_s), opt(b.slo.tpot_s)));
  }
  if (a.slo.e2e_s != b.slo.e2e_s) {
    d.push_back(fmt::format("SLO e2e_p99_s {} vs {}", opt(a.slo.e2e_s), opt(b.slo.e2e_s)));
  }
  std::string listed;
  for (const std::string& x : d) listed += (listed.empty() ? "" : ", ") + x;
  if (a.size_id != b.size_id) {
    return fmt::format("size_id {:016x} vs {:016x}{}", a.size_id, b.size_id,
                       d.empty() ? " (the flags or the requests read differ)" : "; " + listed);
  }
  if (d.empty()) return "";
  // The size_id fingerprints all of these: equal ids with different values mean an edit.
  return fmt::format("the same size_id {:016x}, yet {} (a report header was edited?)", a.size_id,
                     listed);
}

}  // namespace kvsim
