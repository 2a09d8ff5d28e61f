// The sampling rule shared by the OpenMetrics writer and the vLLM log (openmetrics.h states it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "kvsim/core/param.h"
#include "kvsim/sim/report/openmetrics.h"

namespace kvsim::metrics_detail {

// The end of a run: the latest step end, first token or finish of any engine.
inline int64_t run_end_ns(std::span<const EngineRecords> engines) {
  int64_t end = 0;
  for (const EngineRecords& e : engines) {
    for (const TimelineRow& r : e.timeline) end = std::max(end, r.time_ns + r.duration_ns);
    for (const RequestRecord& q : e.requests) end = std::max({end, q.first_token_ns, q.finish_ns});
  }
  return end;
}

// The first scrape at or after t (t >= 0).
inline int64_t scrape_at_or_after(int64_t t, int64_t interval_ns) {
  return t <= 0 ? 0 : (t - 1) / interval_ns + 1;
}

// Scrapes 0 .. scrape_at_or_after(end): checks the interval and the count, naming `param_id`.
inline int64_t scrape_count(std::span<const EngineRecords> engines, int64_t interval_ns,
                            std::string_view param_id) {
  if (interval_ns <= 0 || interval_ns % 1'000'000 != 0) {
    throw std::invalid_argument(
        fmt::format("{} must be a positive whole number of milliseconds (got {} ns)",
                    param(param_id), interval_ns));
  }
  const int64_t count = scrape_at_or_after(run_end_ns(engines), interval_ns) + 1;
  if (count > kMaxMetricsScrapes) {
    throw std::invalid_argument(fmt::format(
        "{} {} s gives {} samples over the run's {} s, more than {}: give a longer interval",
        param(param_id), static_cast<double>(interval_ns) * 1e-9, count,
        static_cast<double>(run_end_ns(engines)) * 1e-9, kMaxMetricsScrapes));
  }
  return count;
}

struct Gauges {
  int32_t running = 0;
  int32_t waiting = 0;
  double kv_usage = 0;  // used / (used + free): vLLM's BlockPool.get_usage()
};

// The gauges of one engine at non-decreasing instants: those of the step in progress at T (the
// latest row started at or before T, when T is before its end); zero when no step is in
// progress (the engine is idle: the replay clock leaves a gap between steps only when nothing
// runs or waits, replay.h) and before the first and after the last step.
class GaugeSampler {
 public:
  explicit GaugeSampler(std::span<const TimelineRow> rows) : rows_(rows) {}
  Gauges at(int64_t t) {
    while (next_ < rows_.size() && rows_[next_].time_ns <= t) ++next_;
    if (next_ == 0) return {};
    const TimelineRow& r = rows_[next_ - 1];
    if (t >= r.time_ns + r.duration_ns) return {};
    const int64_t total = int64_t{r.used_blocks} + r.free_blocks;
    return {r.running, r.waiting,
            total > 0 ? static_cast<double>(r.used_blocks) / static_cast<double>(total) : 0.0};
  }

 private:
  std::span<const TimelineRow> rows_;
  size_t next_ = 0;
};

// A counter's increments, by the scrape that first sees them.
struct CounterEvents {
  std::vector<std::pair<int64_t, int64_t>> events;  // (scrape, delta)
  void add(int64_t scrape, int64_t delta) {
    if (delta != 0) events.emplace_back(scrape, delta);
  }
  // The cumulative value at every scrape 0 .. count-1.
  std::vector<int64_t> cumulative(int64_t count) {
    std::vector<int64_t> out(static_cast<size_t>(count), 0);
    for (const auto& [k, d] : events) out[static_cast<size_t>(std::min(k, count - 1))] += d;
    for (size_t k = 1; k < out.size(); ++k) out[k] += out[k - 1];
    return out;
  }
};

// Generated tokens of a request, spread evenly from its first token to its finish: the count
// at time t is 1 + floor((t - first) * (n - 1) / (finish - first)) between them.
template <typename Add>
void spread_generated_tokens(const RequestRecord& q, int64_t interval_ns, Add&& add) {
  if (q.first_token_ns < 0 || q.output_tokens <= 0) return;
  const int64_t n = q.output_tokens;
  if (q.finish_ns < 0 || q.finish_ns <= q.first_token_ns || n == 1) {
    // Unfinished (an early stop) or all at once: count what exists at the first token.
    add(scrape_at_or_after(q.first_token_ns, interval_ns), q.finish_ns < 0 ? 1 : n);
    return;
  }
  const int64_t f = q.first_token_ns, z = q.finish_ns;
  int64_t done = 0;
  for (int64_t k = scrape_at_or_after(f, interval_ns);; ++k) {
    const int64_t t = k * interval_ns;
    const int64_t have =
        t >= z ? n
               : 1 + std::min(n - 1, static_cast<int64_t>(std::floor(static_cast<double>(t - f) /
                                                                     static_cast<double>(z - f) *
                                                                     static_cast<double>(n - 1))));
    add(k, have - done);
    done = have;
    if (t >= z) break;
  }
}

}  // namespace kvsim::metrics_detail
