#include "kvsim/sim/cluster/replica_snapshot.h"

#include <utility>

namespace kvsim {

ReplicaSnapshots::ReplicaSnapshots(int32_t replicas, int64_t staleness_ns, CurrentState current)
    : staleness_ns_(staleness_ns),
      current_(std::move(current)),
      scraped_(static_cast<size_t>(replicas)),
      routed_since_(static_cast<size_t>(replicas)),
      views_(static_cast<size_t>(replicas)) {}

void ReplicaSnapshots::before_event(int64_t t_ns) {
  if (staleness_ns_ <= 0 || t_ns < next_scrape_ns_) return;
  for (size_t i = 0; i < scraped_.size(); ++i) {
    scraped_[i] = current_(static_cast<int32_t>(i));
    routed_since_[i] = ReplicaView{};
  }
  ++num_scrapes_;
  // The next scrape time after t (t <= 2^63 - 1, so t / S + 1 <= 2^63 / S: no overflow unless
  // the product passes the clock's range, then no further scrape is due).
  const int64_t k = t_ns / staleness_ns_ + 1;
  if (__builtin_mul_overflow(k, staleness_ns_, &next_scrape_ns_)) {
    next_scrape_ns_ = INT64_MAX;
  }
}

std::span<const ReplicaView> ReplicaSnapshots::views() {
  for (size_t i = 0; i < views_.size(); ++i) {
    if (staleness_ns_ <= 0) {
      views_[i] = current_(static_cast<int32_t>(i));
      continue;
    }
    ReplicaView v = scraped_[i];
    v.outstanding += routed_since_[i].outstanding;
    v.queued_requests += routed_since_[i].queued_requests;
    v.queued_tokens += routed_since_[i].queued_tokens;
    views_[i] = v;
  }
  return views_;
}

void ReplicaSnapshots::on_routed(int32_t replica, int64_t prompt_tokens) {
  ReplicaView& d = routed_since_[static_cast<size_t>(replica)];
  d.outstanding += 1;
  d.queued_requests += 1;
  d.queued_tokens += prompt_tokens;
}

}  // namespace kvsim
