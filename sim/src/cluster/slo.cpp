#include "kvsim/sim/cluster/slo.h"

#include <cmath>

#include "kvsim/sim/stats/latency_stats.h"

namespace kvsim {
namespace {

constexpr double kNsPerSecond = 1e9;  // as LatencyCollector: one correctly rounded division

bool exceeds(const std::optional<double>& value, const std::optional<double>& threshold) {
  return threshold && (!value || *value > *threshold);
}

// Whether the request is in the metric's population, has a value, and which.
struct Violations {
  bool ttft = false, tpot = false, e2e = false;
};

// A decided request: finished (value known) or rejected (never meets it).
Violations decided_violations(const RequestRecord& r, const SloSpec& slo) {
  Violations v;
  v.ttft = exceeds(request_ttft_s(r), slo.ttft_s);
  v.e2e = exceeds(request_e2e_s(r), slo.e2e_s);
  v.tpot = r.max_tokens >= 2 && exceeds(request_tpot_s(r), slo.tpot_s);
  return v;
}

// Largest whole-ns latency within a threshold of `s` seconds, so a value in ns exceeds the
// threshold (as a double of seconds) iff it exceeds this.
int64_t threshold_ns(double s) {
  if (s * kNsPerSecond >= 9.2e18) return INT64_MAX;  // beyond the clock: never passed
  auto ns = static_cast<int64_t>(std::floor(s * kNsPerSecond));
  while (static_cast<double>(ns + 1) / kNsPerSecond <= s) ++ns;
  while (ns > 0 && static_cast<double>(ns) / kNsPerSecond > s) --ns;
  return ns;
}

}  // namespace

int64_t slo_p99_allowance(int64_t n) {
  return n <= 0 ? 0 : n - 1 - nearest_rank_index(0.99, n);
}

std::optional<double> request_ttft_s(const RequestRecord& r) {
  if (!r.finished) return std::nullopt;
  return static_cast<double>(r.first_token_ns - r.arrival_ns) / kNsPerSecond;
}

std::optional<double> request_tpot_s(const RequestRecord& r) {
  if (!r.finished || r.output_tokens < 2) return std::nullopt;
  return static_cast<double>(r.finish_ns - r.first_token_ns) / kNsPerSecond /
         static_cast<double>(r.output_tokens - 1);
}

std::optional<double> request_e2e_s(const RequestRecord& r) {
  if (!r.finished) return std::nullopt;
  return static_cast<double>(r.finish_ns - r.arrival_ns) / kNsPerSecond;
}

bool meets_slo(const RequestRecord& r, const SloSpec& slo) {
  if (!r.finished) return false;
  const Violations v = decided_violations(r, slo);
  return !v.ttft && !v.tpot && !v.e2e;
}

SloReport compute_slo_report(const SloSpec& slo, std::span<const RequestRecord> records,
                             int64_t sim_ns) {
  SloReport rep;
  int64_t tpot_population = 0;
  for (const RequestRecord& r : records) {
    if (r.max_tokens >= 2) ++tpot_population;
    if (meets_slo(r, slo)) ++rep.met;
    // Undecided requests (an early stop) have no value: exceeds() counts them as violating.
    const Violations v = decided_violations(r, slo);
    rep.ttft_violations += v.ttft;
    rep.tpot_violations += v.tpot;
    rep.e2e_violations += v.e2e;
  }
  const auto n = static_cast<int64_t>(records.size());
  rep.attainment = n > 0 ? static_cast<double>(rep.met) / static_cast<double>(n) : 0.0;
  rep.goodput_rps =
      sim_ns > 0 ? static_cast<double>(rep.met) / (static_cast<double>(sim_ns) / kNsPerSecond)
                 : 0.0;
  rep.p99_verdict = rep.ttft_violations <= slo_p99_allowance(n) &&
                    rep.e2e_violations <= slo_p99_allowance(n) &&
                    rep.tpot_violations <= slo_p99_allowance(tpot_population);
  return rep;
}

SloFailDetector::SloFailDetector(const SloSpec& slo, std::span<const RequestRecord> records)
    : slo_(slo), records_(records), marked_(records.size(), 0) {
  const auto n = static_cast<int64_t>(records.size());
  int64_t tpot_population = 0;
  for (const RequestRecord& r : records) tpot_population += r.max_tokens >= 2;
  ttft_allowance_ = slo_p99_allowance(n);
  e2e_allowance_ = slo_p99_allowance(n);
  tpot_allowance_ = slo_p99_allowance(tpot_population);
  if (slo.ttft_s) ttft_ns_ = threshold_ns(*slo.ttft_s);
  if (slo.e2e_s) e2e_ns_ = threshold_ns(*slo.e2e_s);
}

void SloFailDetector::mark(int64_t id, Metric m) {
  uint8_t& bits = marked_[static_cast<size_t>(id)];
  if ((bits & m) != 0) return;
  bits = static_cast<uint8_t>(bits | m);
  switch (m) {
    case kTtft:
      failed_ = failed_ || ++ttft_violations_ > ttft_allowance_;
      break;
    case kTpot:
      failed_ = failed_ || ++tpot_violations_ > tpot_allowance_;
      break;
    case kE2e:
      failed_ = failed_ || ++e2e_violations_ > e2e_allowance_;
      break;
  }
}

void SloFailDetector::on_done(int64_t id) {
  const Violations v = decided_violations(records_[static_cast<size_t>(id)], slo_);
  if (v.ttft) mark(id, kTtft);
  if (v.tpot) mark(id, kTpot);
  if (v.e2e) mark(id, kE2e);
}

void SloFailDetector::on_time(int64_t now_ns, int64_t routed) {
  // Arrivals are sorted, so the requests whose deadline passed are a prefix of the trace.
  auto scan = [&](int64_t& next, int64_t limit_ns, Metric m, auto reached_ns) {
    while (next < routed) {
      const RequestRecord& r = records_[static_cast<size_t>(next)];
      if (now_ns - r.arrival_ns <= limit_ns) break;
      const int64_t at = reached_ns(r);
      if (at < 0 || at - r.arrival_ns > limit_ns) mark(next, m);
      ++next;
    }
  };
  if (ttft_ns_) {
    scan(ttft_scan_, *ttft_ns_, kTtft, [](const RequestRecord& r) { return r.first_token_ns; });
  }
  if (e2e_ns_) {
    scan(e2e_scan_, *e2e_ns_, kE2e,
         [](const RequestRecord& r) { return r.finished ? r.finish_ns : int64_t{-1}; });
  }
}

}  // namespace kvsim
