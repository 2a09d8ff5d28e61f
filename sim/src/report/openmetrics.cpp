// The OpenMetrics writer (openmetrics.h). Names, types, help texts, label sets and buckets are
// vLLM 0.26.0's: vllm/v1/metrics/loggers.py, PrometheusStatLogger.__init__ (labelnames
// ["model_name", "engine"], engine = str(index); request_success adds "finished_reason", one
// series per FinishReason: stop, length, abort, error, repetition), values as
// PrometheusStatLogger.record observes them.
#include "kvsim/sim/report/openmetrics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "metrics_sampling.h"

namespace kvsim {
namespace {

using metrics_detail::CounterEvents;
using metrics_detail::GaugeSampler;
using metrics_detail::scrape_at_or_after;

// PrometheusStatLogger.__init__: histogram_time_to_first_token.
constexpr std::array<double, 22> kTtftBuckets = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
    1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
// histogram_inter_token_latency.
constexpr std::array<double, 19> kItlBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                                0.3,  0.4,   0.5,  0.75,  1.0, 2.5,  5.0,
                                                7.5,  10.0,  20.0, 40.0,  80.0};
// request_latency_buckets (e2e_request_latency, request_queue_time).
constexpr std::array<double, 21> kRequestLatencyBuckets = {
    0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
// histogram_iteration_tokens.
constexpr std::array<double, 13> kIterationTokenBuckets = {1,   8,    16,   32,   64,   128,  256,
                                                           512, 1024, 2048, 4096, 8192, 16384};
// FINISH_REASON_STRINGS (vllm/v1/engine/__init__.py), in FinishReason order.
constexpr std::array<std::string_view, 5> kFinishReasons = {"stop", "length", "abort", "error",
                                                            "repetition"};

// prometheus_client's floatToGoString for finite values: shortest repr, "1.0" not "1".
std::string go_float(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string escape_label(std::string_view v) {
  std::string out;
  for (const char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// Seconds with millisecond precision (Prometheus keeps ms).
std::string timestamp(int64_t start_unix_ns, int64_t t_ns) {
  const int64_t ms = (start_unix_ns + t_ns) / 1'000'000;
  return fmt::format("{}.{:03d}", ms / 1000, ms % 1000);
}

double seconds(int64_t ns) {
  return static_cast<double>(ns) * 1e-9;
}

struct Family {
  const char* name;
  const char* type;
  const char* help;
};

void header(std::ostream& os, const Family& f) {
  os << "# HELP " << f.name << ' ' << f.help << "\n# TYPE " << f.name << ' ' << f.type << '\n';
}

// One histogram's observations: (scrape, value, count).
struct HistogramEvents {
  std::span<const double> buckets;
  std::vector<std::tuple<int64_t, double, int64_t>> events;
  void add(int64_t scrape, double value, int64_t count = 1) {
    if (count > 0) events.emplace_back(scrape, value, count);
  }
};

// What one engine's scrapes show, beyond the gauges.
struct EngineSeries {
  CounterEvents prefix_queries, prefix_hits, preemptions, prompt_tokens, generation_tokens;
  std::array<CounterEvents, kFinishReasons.size()> success;
  HistogramEvents iteration_tokens{kIterationTokenBuckets, {}};
  HistogramEvents ttft{kTtftBuckets, {}};
  HistogramEvents itl{kItlBuckets, {}};
  HistogramEvents e2e{kRequestLatencyBuckets, {}};
  HistogramEvents queue{kRequestLatencyBuckets, {}};
  HistogramEvents prefill{kRequestLatencyBuckets, {}};
  HistogramEvents decode{kRequestLatencyBuckets, {}};
};

EngineSeries engine_series(const EngineRecords& e, int64_t interval) {
  EngineSeries s;
  for (const TimelineRow& r : e.timeline) {
    const int64_t k = scrape_at_or_after(r.time_ns + r.duration_ns, interval);
    s.preemptions.add(k, r.preemptions);
    if (r.scheduled_tokens > 0) s.iteration_tokens.add(k, static_cast<double>(r.scheduled_tokens));
  }
  for (const RequestRecord& q : e.requests) {
    if (q.rejected && q.first_scheduled_ns < 0) continue;
    if (q.first_scheduled_ns >= 0) {
      const int64_t k = scrape_at_or_after(q.first_scheduled_ns, interval);
      s.prefix_queries.add(k, q.prompt_tokens);
      s.prefix_hits.add(k, q.prefix_hit_tokens);
      s.queue.add(k, seconds(q.first_scheduled_ns - q.arrival_ns));
    }
    if (q.first_token_ns >= 0) {
      const int64_t k = scrape_at_or_after(q.first_token_ns, interval);
      s.prompt_tokens.add(k, q.prompt_tokens);
      s.ttft.add(k, seconds(q.first_token_ns - q.arrival_ns));
    }
    metrics_detail::spread_generated_tokens(
        q, interval, [&s](int64_t k, int64_t d) { s.generation_tokens.add(k, d); });
    if (q.finished && q.finish_ns >= 0) {
      const int64_t k = scrape_at_or_after(q.finish_ns, interval);
      s.success[1].add(k, 1);  // "length": max_tokens or max_model_len (kvsim has no stop)
      s.e2e.add(k, seconds(q.finish_ns - q.arrival_ns));
      if (q.first_token_ns >= 0) {
        // FinishedRequestStats: prefill = first scheduled .. first token, decode = first token
        // .. last token.
        s.prefill.add(k, seconds(q.first_token_ns - q.first_scheduled_ns));
        s.decode.add(k, seconds(q.finish_ns - q.first_token_ns));
      }
      if (q.output_tokens > 1 && q.first_token_ns >= 0) {
        // kvsim keeps no per-token time: every gap is the request's mean (TPOT).
        s.itl.add(k, seconds(q.finish_ns - q.first_token_ns) / (q.output_tokens - 1),
                  q.output_tokens - 1);
      }
    }
  }
  return s;
}

class Writer {
 public:
  Writer(std::ostream& os, const MetricsSampling& sampling, int64_t scrapes)
      : os_(os),
        sampling_(sampling),
        scrapes_(scrapes),
        model_(escape_label(sampling.model_name)) {}

  std::string labels(size_t engine) const {
    return fmt::format("model_name=\"{}\",engine=\"{}\"", model_, engine);
  }
  std::string ts(int64_t k) const {
    return timestamp(sampling_.start_unix_ns, k * sampling_.interval_ns);
  }

  template <typename Value>
  void series(const char* sample, const std::string& labels, const Value& value_at) {
    for (int64_t k = 0; k < scrapes_; ++k) {
      os_ << sample << '{' << labels << "} " << value_at(k) << ' ' << ts(k) << '\n';
    }
  }

  void counter(const char* sample, const std::string& labels, CounterEvents& c) {
    const std::vector<int64_t> v = c.cumulative(scrapes_);
    series(sample, labels, [&v](int64_t k) { return v[static_cast<size_t>(k)]; });
  }

  void histogram(const char* name, const std::string& labels, HistogramEvents& h) {
    std::sort(h.events.begin(), h.events.end(),
              [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
    std::vector<int64_t> counts(h.buckets.size() + 1, 0);  // per bucket (not cumulative) + Inf
    double sum = 0;
    int64_t count = 0;
    size_t next = 0;
    for (int64_t k = 0; k < scrapes_; ++k) {
      for (; next < h.events.size() && (std::get<0>(h.events[next]) <= k || k == scrapes_ - 1);
           ++next) {
        const auto& [scrape, value, n] = h.events[next];
        const size_t b = static_cast<size_t>(
            std::lower_bound(h.buckets.begin(), h.buckets.end(), value) - h.buckets.begin());
        counts[b] += n;
        count += n;
        sum += value * static_cast<double>(n);
      }
      const std::string t = ts(k);
      int64_t cumulative = 0;
      for (size_t b = 0; b <= h.buckets.size(); ++b) {
        cumulative += counts[b];
        os_ << name << "_bucket{" << labels << ",le=\""
            << (b < h.buckets.size() ? go_float(h.buckets[b]) : std::string("+Inf")) << "\"} "
            << cumulative << ' ' << t << '\n';
      }
      os_ << name << "_count{" << labels << "} " << count << ' ' << t << '\n';
      os_ << name << "_sum{" << labels << "} " << go_float(sum) << ' ' << t << '\n';
    }
  }

 private:
  std::ostream& os_;
  const MetricsSampling& sampling_;
  int64_t scrapes_;
  std::string model_;
};

}  // namespace

std::vector<EngineRecords> ReplicaRecords::engines() const {
  std::vector<EngineRecords> out(timeline.size());
  for (size_t r = 0; r < out.size(); ++r) out[r] = {timeline[r], requests[r]};
  return out;
}

ReplicaRecords split_by_replica(std::span<const TimelineRow> timeline,
                                std::span<const int32_t> timeline_replica,
                                std::span<const RequestRecord> requests,
                                std::span<const int32_t> request_replica, int32_t replicas) {
  ReplicaRecords out;
  out.timeline.resize(static_cast<size_t>(std::max(replicas, 1)));
  out.requests.resize(out.timeline.size());
  const auto in_range = [&out](int32_t r) {
    return r >= 0 && static_cast<size_t>(r) < out.timeline.size();
  };
  for (size_t i = 0; i < timeline.size() && i < timeline_replica.size(); ++i) {
    if (in_range(timeline_replica[i])) {
      out.timeline[static_cast<size_t>(timeline_replica[i])].push_back(timeline[i]);
    }
  }
  for (size_t i = 0; i < requests.size() && i < request_replica.size(); ++i) {
    if (in_range(request_replica[i])) {
      out.requests[static_cast<size_t>(request_replica[i])].push_back(requests[i]);
    }
  }
  return out;
}

void write_openmetrics(std::ostream& os, std::span<const EngineRecords> engines,
                       const MetricsSampling& sampling) {
  const int64_t scrapes =
      metrics_detail::scrape_count(engines, sampling.interval_ns, "metrics_interval");
  const int64_t interval = sampling.interval_ns;
  Writer w(os, sampling, scrapes);
  std::vector<EngineSeries> series;
  series.reserve(engines.size());
  for (const EngineRecords& e : engines) series.push_back(engine_series(e, interval));

  // Gauges (PrometheusStatLogger.record: scheduler_stats).
  const std::array<Family, 3> gauges = {{
      {"vllm:num_requests_running", "gauge", "Number of requests in model execution batches."},
      {"vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed."},
      {"vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage."},
  }};
  for (size_t g = 0; g < gauges.size(); ++g) {
    header(os, gauges[g]);
    for (size_t e = 0; e < engines.size(); ++e) {
      GaugeSampler sampler(engines[e].timeline);
      w.series(gauges[g].name, w.labels(e), [&](int64_t k) -> std::string {
        const metrics_detail::Gauges v = sampler.at(k * interval);
        if (g == 0) return std::to_string(v.running);
        if (g == 1) return std::to_string(v.waiting);
        return go_float(v.kv_usage);
      });
    }
  }

  // Counters: the family name without _total, the samples with it (OpenMetrics).
  struct CounterFamily {
    Family family;
    const char* sample;
    CounterEvents EngineSeries::*events;
  };
  const std::array<CounterFamily, 5> counters = {{
      {{"vllm:prefix_cache_queries", "counter",
        "Prefix cache queries, in terms of number of queried tokens."},
       "vllm:prefix_cache_queries_total",
       &EngineSeries::prefix_queries},
      {{"vllm:prefix_cache_hits", "counter",
        "Prefix cache hits, in terms of number of cached tokens."},
       "vllm:prefix_cache_hits_total",
       &EngineSeries::prefix_hits},
      {{"vllm:num_preemptions", "counter", "Cumulative number of preemption from the engine."},
       "vllm:num_preemptions_total",
       &EngineSeries::preemptions},
      {{"vllm:prompt_tokens", "counter", "Number of prefill tokens processed."},
       "vllm:prompt_tokens_total",
       &EngineSeries::prompt_tokens},
      {{"vllm:generation_tokens", "counter", "Number of generation tokens processed."},
       "vllm:generation_tokens_total",
       &EngineSeries::generation_tokens},
  }};
  for (const CounterFamily& c : counters) {
    header(os, c.family);
    for (size_t e = 0; e < engines.size(); ++e) {
      w.counter(c.sample, w.labels(e), series[e].*c.events);
    }
  }
  header(os, {"vllm:request_success", "counter", "Count of successfully processed requests."});
  for (size_t e = 0; e < engines.size(); ++e) {
    for (size_t r = 0; r < kFinishReasons.size(); ++r) {
      w.counter("vllm:request_success_total",
                fmt::format("{},finished_reason=\"{}\"", w.labels(e), kFinishReasons[r]),
                series[e].success[r]);
    }
  }

  // Histograms.
  struct HistogramFamily {
    Family family;
    HistogramEvents EngineSeries::*events;
  };
  const std::array<HistogramFamily, 7> histograms = {{
      {{"vllm:iteration_tokens_total", "histogram",
        "Histogram of number of tokens per engine_step."},
       &EngineSeries::iteration_tokens},
      {{"vllm:time_to_first_token_seconds", "histogram",
        "Histogram of time to first token in seconds."},
       &EngineSeries::ttft},
      {{"vllm:inter_token_latency_seconds", "histogram",
        "Histogram of inter-token latency in seconds."},
       &EngineSeries::itl},
      {{"vllm:e2e_request_latency_seconds", "histogram",
        "Histogram of e2e request latency in seconds."},
       &EngineSeries::e2e},
      {{"vllm:request_queue_time_seconds", "histogram",
        "Histogram of time spent in WAITING phase for request."},
       &EngineSeries::queue},
      {{"vllm:request_prefill_time_seconds", "histogram",
        "Histogram of time spent in PREFILL phase for request."},
       &EngineSeries::prefill},
      {{"vllm:request_decode_time_seconds", "histogram",
        "Histogram of time spent in DECODE phase for request."},
       &EngineSeries::decode},
  }};
  for (const HistogramFamily& h : histograms) {
    header(os, h.family);
    for (size_t e = 0; e < engines.size(); ++e) {
      w.histogram(h.family.name, w.labels(e), series[e].*h.events);
    }
  }
  os << "# EOF\n";
}

}  // namespace kvsim
