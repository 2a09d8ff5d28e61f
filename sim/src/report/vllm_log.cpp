// vLLM's periodic engine log line (vllm_log.h): vLLM 0.26.0's LoggingStatLogger.log and
// _update_stats (vllm/v1/metrics/loggers.py), CachingMetrics (vllm/v1/metrics/stats.py).
#include "kvsim/sim/report/vllm_log.h"

#include <ctime>
#include <deque>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "metrics_sampling.h"

namespace kvsim {
namespace {

using metrics_detail::CounterEvents;
using metrics_detail::scrape_at_or_after;

// vllm/logger.py: _FORMAT "%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s",
// _DATE_FORMAT "%m-%d %H:%M:%S"; LoggingStatLogger.log's call is loggers.py line 310. UTC here.
std::string log_prefix(int64_t unix_ns) {
  const std::time_t secs = static_cast<std::time_t>(unix_ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("INFO {:02d}-{:02d} {:02d}:{:02d}:{:02d} [loggers.py:310] ", tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

// CachingMetrics(max_recent_requests=1000): the hit rate of the most recent requests.
class CachingMetrics {
 public:
  void observe(int64_t queries, int64_t hits) {
    queue_.emplace_back(queries, hits);
    requests_ += 1;
    queries_ += queries;
    hits_ += hits;
    while (queue_.size() > 1 && requests_ > kMaxRecentRequests) {
      queries_ -= queue_.front().first;
      hits_ -= queue_.front().second;
      requests_ -= 1;
      queue_.pop_front();
    }
  }
  double hit_rate() const {
    return queries_ == 0 ? 0.0 : static_cast<double>(hits_) / static_cast<double>(queries_);
  }

 private:
  static constexpr int64_t kMaxRecentRequests = 1000;
  std::deque<std::pair<int64_t, int64_t>> queue_;
  int64_t requests_ = 0, queries_ = 0, hits_ = 0;
};

struct EngineLog {
  std::vector<int64_t> prompt_computed;  // cumulative, per scrape
  std::vector<int64_t> generated;
  std::vector<int64_t> preemptions;
  // (scrape, first_scheduled_ns, queries, hits), in time order
  std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>> lookups;
};

EngineLog engine_log(const EngineRecords& e, int64_t interval, int64_t scrapes) {
  CounterEvents prompt, generated, preemptions;
  EngineLog out;
  for (const TimelineRow& r : e.timeline) {
    preemptions.add(scrape_at_or_after(r.time_ns + r.duration_ns, interval), r.preemptions);
  }
  for (const RequestRecord& q : e.requests) {
    if (q.first_token_ns >= 0) {
      prompt.add(scrape_at_or_after(q.first_token_ns, interval),
                 std::max<int64_t>(0, int64_t{q.prompt_tokens} - q.prefix_hit_tokens));
    }
    metrics_detail::spread_generated_tokens(
        q, interval, [&generated](int64_t k, int64_t d) { generated.add(k, d); });
    if (q.first_scheduled_ns >= 0) {
      out.lookups.emplace_back(scrape_at_or_after(q.first_scheduled_ns, interval),
                               q.first_scheduled_ns, q.prompt_tokens, q.prefix_hit_tokens);
    }
  }
  std::sort(out.lookups.begin(), out.lookups.end());
  out.prompt_computed = prompt.cumulative(scrapes);
  out.generated = generated.cumulative(scrapes);
  out.preemptions = preemptions.cumulative(scrapes);
  return out;
}

}  // namespace

void write_vllm_log(std::ostream& os, std::span<const EngineRecords> engines,
                    const MetricsSampling& sampling) {
  const int64_t interval = sampling.interval_ns;
  // One more line than scrapes: the one after the run that still shows the last throughput.
  const int64_t scrapes = metrics_detail::scrape_count(engines, interval, "vllm_log_interval") + 1;
  const double interval_s = static_cast<double>(interval) * 1e-9;
  std::vector<EngineLog> logs;
  std::vector<metrics_detail::GaugeSampler> gauges;
  std::vector<CachingMetrics> caching(engines.size());
  std::vector<size_t> next_lookup(engines.size(), 0);
  std::vector<std::pair<double, double>> last_throughput(engines.size(), {0.0, 0.0});
  for (const EngineRecords& e : engines) {
    logs.push_back(engine_log(e, interval, scrapes));
    gauges.emplace_back(e.timeline);
  }
  for (int64_t k = 1; k < scrapes; ++k) {
    const int64_t t = k * interval;
    const std::string prefix = log_prefix(sampling.start_unix_ns + t);
    for (size_t e = 0; e < engines.size(); ++e) {
      const EngineLog& l = logs[e];
      const auto delta = [k](const std::vector<int64_t>& v) {
        return v[static_cast<size_t>(k)] - v[static_cast<size_t>(k - 1)];
      };
      for (; next_lookup[e] < l.lookups.size() && std::get<0>(l.lookups[next_lookup[e]]) <= k;
           ++next_lookup[e]) {
        caching[e].observe(std::get<2>(l.lookups[next_lookup[e]]),
                           std::get<3>(l.lookups[next_lookup[e]]));
      }
      const double prompt_tp = static_cast<double>(delta(l.prompt_computed)) / interval_s;
      const double generation_tp = static_cast<double>(delta(l.generated)) / interval_s;
      const metrics_detail::Gauges g = gauges[e].at(t);
      const bool idle = prompt_tp == 0 && generation_tp == 0 && last_throughput[e].first == 0 &&
                        last_throughput[e].second == 0;
      last_throughput[e] = {prompt_tp, generation_tp};
      if (idle) continue;  // logger.debug in vLLM: not shown at the default level
      std::string line = fmt::format(
          "{}Engine {:03d}: Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: "
          "{:.1f} tokens/s, Running: {} reqs, Waiting: {} reqs, ",
          prefix, e, prompt_tp, generation_tp, g.running, g.waiting);
      if (const int64_t p = delta(l.preemptions); p > 0)
        line += fmt::format("Preemptions: {}, ", p);
      line += fmt::format("GPU KV cache usage: {:.1f}%, Prefix cache hit rate: {:.1f}%\n",
                          g.kv_usage * 100, caching[e].hit_rate() * 100);
      os << line;
    }
  }
}

}  // namespace kvsim
