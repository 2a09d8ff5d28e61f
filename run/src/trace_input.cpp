#include "kvsim/run/trace_input.h"

#include <sys/stat.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "kvsim/core/param.h"

namespace kvsim::run {

void check_trace_settings(const TraceReadOptions& o, const TraceSettingsGiven& given) {
  const bool poisson = o.arrival == ArrivalMode::POISSON;
  for (const auto& [id, set] : {std::pair{"rate", given.rate}, std::pair{"seed", given.seed}}) {
    if (!poisson && set) {
      throw std::invalid_argument(
          fmt::format("{} needs {}", param(id), param("arrival", "poisson")));
    }
  }
  if (poisson && !given.rate) {
    throw std::invalid_argument(fmt::format("{} needs {} (requests per second)",
                                            param("arrival", "poisson"), param("rate")));
  }
}

void require_requests(const Trace& trace, const TraceReadOptions& o) {
  require_requests(trace, static_cast<int64_t>(trace.requests.size()), o);
}

void require_requests(const Trace& trace, int64_t num_requests, const TraceReadOptions& o) {
  if (num_requests > 0) return;
  std::vector<std::string> why;
  why.push_back(fmt::format("{} data rows read", trace.rows_read));
  if (const std::string dropped = describe_dropped(trace); !dropped.empty()) {
    why.push_back(dropped);
  }
  if (trace.rows_read > trace.dropped_total() && (o.start_s > 0 || o.duration_s > 0)) {
    why.push_back(fmt::format("none in the window {} {}",
                              param("start", fmt::format("{}", o.start_s)),
                              param("duration", fmt::format("{}", o.duration_s))));
  }
  std::string text;
  for (const std::string& w : why) text += (text.empty() ? "" : "; ") + w;
  throw std::invalid_argument(
      fmt::format("{}: no requests left after filtering ({})", trace.path, text));
}

bool trace_is_rereadable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace kvsim::run
