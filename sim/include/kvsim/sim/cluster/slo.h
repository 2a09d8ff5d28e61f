// SLO accounting of a cluster replay: per-request latencies as LatencyCollector computes them,
// attainment/goodput, the p99 verdict, and the early-stop detector of `kvsim size`.
//
// Verdict rule (exactly the nearest-rank p99 of latency_stats.h): rank every request of a
// metric's population; rejected requests (and, after an early stop, requests not yet decided)
// count as violating. The p99 is within the threshold iff violations <= slo_p99_allowance(n):
// n - 1 - nearest_rank_index(0.99, n) = floor(0.01 n). Populations: all trace requests for TTFT
// and e2e, requests of max_tokens >= 2 for TPOT (one token has no inter-token time).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kvsim/sim/cluster/cluster_replay.h"
#include "kvsim/sim/engine/replay.h"

namespace kvsim {

// The number of values of a population of n that may exceed a threshold while the nearest-rank
// p99 stays within it (0 for n = 0).
int64_t slo_p99_allowance(int64_t n);

// Seconds, as LatencyCollector computes them; nullopt when the request has no such value
// (not finished, or TPOT of a request with fewer than 2 output tokens).
std::optional<double> request_ttft_s(const RequestRecord& r);
std::optional<double> request_tpot_s(const RequestRecord& r);
std::optional<double> request_e2e_s(const RequestRecord& r);

// A finished request within every set threshold.
bool meets_slo(const RequestRecord& r, const SloSpec& slo);

// Attainment, goodput and the verdict over all `records` (the whole trace). `undecided`: the
// run stopped early, so a request neither finished nor rejected counts as violating.
SloReport compute_slo_report(const SloSpec& slo, std::span<const RequestRecord> records,
                             int64_t sim_ns);

// Decides "fail" as soon as more requests than the allowance violate one set threshold:
// on_done() at a request's finish or rejection, on_time(now) for requests that have waited past
// a TTFT or e2e threshold without reaching it (such a request violates whatever happens next,
// because a token recorded later exists at a time >= now).
class SloFailDetector {
 public:
  // `records`: the whole trace's records (their arrivals and max_tokens fix the populations).
  SloFailDetector(const SloSpec& slo, std::span<const RequestRecord> records);
  void on_done(int64_t request_id);
  // `routed`: requests [0, routed) have arrived (been routed or refused).
  void on_time(int64_t now_ns, int64_t routed);
  bool failed() const { return failed_; }

 private:
  enum Metric : uint8_t { kTtft = 1, kTpot = 2, kE2e = 4 };
  void mark(int64_t id, Metric m);

  SloSpec slo_;
  std::span<const RequestRecord> records_;
  std::vector<uint8_t> marked_;  // per request: Metric bits already counted
  int64_t ttft_violations_ = 0, tpot_violations_ = 0, e2e_violations_ = 0;
  int64_t ttft_allowance_ = 0, tpot_allowance_ = 0, e2e_allowance_ = 0;
  std::optional<int64_t> ttft_ns_, e2e_ns_;  // thresholds rounded down to whole ns
  int64_t ttft_scan_ = 0, e2e_scan_ = 0;     // next request whose timeout is not checked yet
  bool failed_ = false;
};

}  // namespace kvsim
