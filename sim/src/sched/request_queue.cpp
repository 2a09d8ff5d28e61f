#include "kvsim/sim/sched/request_queue.h"

#include <algorithm>
#include <stdexcept>
#include <tuple>

namespace kvsim {
namespace {
// std heaps keep the "largest" element at the front; ordering by "served later" puts the request
// served first at the front.
bool comes_after(const Request* a, const Request* b) {
  return RequestQueue::served_before(*b, *a);
}
}  // namespace

bool RequestQueue::served_before(const Request& a, const Request& b) {
  const int64_t ia = a.id_for_ordering();
  const int64_t ib = b.id_for_ordering();
  return std::tie(a.priority, a.arrival_time_ns, ia) < std::tie(b.priority, b.arrival_time_ns, ib);
}

void RequestQueue::add(Request* r) {
  if (policy_ == SchedulingPolicy::FCFS) {
    fifo_.push_back(r);
  } else {
    heap_.push_back(r);
    std::push_heap(heap_.begin(), heap_.end(), comes_after);
  }
}

void RequestQueue::prepend(Request* r) {
  if (policy_ == SchedulingPolicy::FCFS) {
    fifo_.push_front(r);
  } else {
    add(r);
  }
}

Request* RequestQueue::peek() const {
  if (empty()) throw std::logic_error("RequestQueue::peek on an empty queue");
  return policy_ == SchedulingPolicy::FCFS ? fifo_.front() : heap_.front();
}

Request* RequestQueue::pop() {
  Request* r = peek();
  if (policy_ == SchedulingPolicy::FCFS) {
    fifo_.pop_front();
  } else {
    std::pop_heap(heap_.begin(), heap_.end(), comes_after);
    heap_.pop_back();
  }
  return r;
}

bool RequestQueue::remove(const Request* r) {
  if (policy_ == SchedulingPolicy::FCFS) {
    const auto it = std::find(fifo_.begin(), fifo_.end(), r);
    if (it == fifo_.end()) return false;
    fifo_.erase(it);
    return true;
  }
  const auto it = std::find(heap_.begin(), heap_.end(), r);
  if (it == heap_.end()) return false;
  heap_.erase(it);
  // The key is a total order (request ids are unique), so the pop order after re-heapifying is
  // the one vLLM's heapify gives.
  std::make_heap(heap_.begin(), heap_.end(), comes_after);
  return true;
}

}  // namespace kvsim
