// RequestQueue: the scheduler's waiting queue (vLLM: vllm/v1/core/sched/request_queue.py).
//
// Two policies, chosen at construction:
//   * FCFS (FCFSRequestQueue, a deque): add() appends, peek()/pop() take the front, prepend()
//     pushes to the front (a preempted request is retried first).
//   * PRIORITY (PriorityRequestQueue, a binary heap): ordered by (priority, arrival_time_ns,
//     Request::id_for_ordering(): the run-wide id, not the reusable slot), lower first; add() and
//     prepend() are the same heap push, so a preempted request's position depends only on that key
//     (vLLM: Request.__lt__). Ties on (priority, arrival): vLLM compares request ids as STRINGS
//     ("10" < "9"); kvsim compares its dense integer ids (9 < 10). Real vLLM request ids are random
//     strings, so neither order is "right"; zero-padded ids of equal width make the two agree.
// The queue stores non-owning pointers; every pointed-to Request must outlive its membership.
// Invariant: a request is in the queue at most once (the scheduler guarantees it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "kvsim/core/request.h"

namespace kvsim {

enum class SchedulingPolicy : uint8_t { FCFS, PRIORITY };

class RequestQueue {
 public:
  explicit RequestQueue(SchedulingPolicy policy) : policy_(policy) {}

  SchedulingPolicy policy() const { return policy_; }
  // Not size() == 0: deque::size() is node arithmetic, and the scheduler asks every step.
  bool empty() const { return policy_ == SchedulingPolicy::FCFS ? fifo_.empty() : heap_.empty(); }
  size_t size() const { return policy_ == SchedulingPolicy::FCFS ? fifo_.size() : heap_.size(); }

  void add(Request* r);
  void prepend(Request* r);
  // The next request to admit. Precondition: !empty().
  Request* peek() const;
  Request* pop();
  // Removes `r` wherever it is (vLLM: remove_requests; async scheduling uses it for a preempted
  // request that finishes when its in-flight token arrives). Returns false if it is not queued.
  bool remove(const Request* r);

  // The key the PRIORITY heap orders by: true when a is served before b.
  static bool served_before(const Request& a, const Request& b);

 private:
  SchedulingPolicy policy_;
  std::deque<Request*> fifo_;
  std::vector<Request*> heap_;  // std heap with `comes_after` as "less" => front = served first
};

}  // namespace kvsim
