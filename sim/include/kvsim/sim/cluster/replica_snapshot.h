// The router's view of the replicas under a scrape interval (ClusterConfig::router_staleness_ns).
//
// With staleness S > 0 a real router scrapes each engine's metrics every S: what it sees at time
// t is every replica's state at the last scrape k*S <= t, plus what it routed itself since (a
// router knows what it sent: each such request adds 1 to outstanding and queued, and its prompt
// to queued tokens). Completions, admissions and KV usage changes since the scrape stay unseen.
// With S = 0 the view is the replicas' state right now.
//
// Driving contract: before_event(t) is called before every event of the run in time order; a
// scrape due at k*S <= t is taken then, when every event before t (hence before k*S) has been
// processed and none at or after it, so the scrape is exactly the state at k*S.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kvsim/sim/cluster/router.h"

namespace kvsim {

class ReplicaSnapshots {
 public:
  // `current(i)`: replica i's state now.
  using CurrentState = std::function<ReplicaView(int32_t replica)>;

  ReplicaSnapshots(int32_t replicas, int64_t staleness_ns, CurrentState current);

  void before_event(int64_t t_ns);
  // The views to route with (valid until the next call).
  std::span<const ReplicaView> views();
  void on_routed(int32_t replica, int64_t prompt_tokens);

  int64_t num_scrapes() const { return num_scrapes_; }

 private:
  int64_t staleness_ns_;
  CurrentState current_;
  std::vector<ReplicaView> scraped_;       // state at the last scrape
  std::vector<ReplicaView> routed_since_;  // outstanding/queued/queued_tokens routed since
  std::vector<ReplicaView> views_;
  int64_t next_scrape_ns_ = 0;
  int64_t num_scrapes_ = 0;
};

}  // namespace kvsim
