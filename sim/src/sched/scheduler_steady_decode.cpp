// Steady decoding: engine steps whose cost is O(events), not O(running) (scheduler.h).
//
// Between two steps of the mode every running request r is in the same phase: num_computed ==
// num_tokens == x, one placeholder, one token in flight, and its table holds x tokens. A step
// without an event for r (schedule batch s, then update batch s-1) does exactly this to it:
//   schedule: n = 1, the slot fits its table, no block fills (allocate_slots_in_held_blocks
//             allocates and caches nothing), computed += 1, in flight += 1, placeholders += 1;
//   update:   in flight -= 1, one token appended without completing a hash block, placeholders
//             -= 1, cache_blocks(x) caches nothing, no stop condition.
// So r only moves x by one and its table's held tokens by one, which the lazy clock does for all
// such requests at once. steady_next_event() finds the first step j (from now, j >= 0) at which
// any of those clauses could fail, from r's exact state:
//   stop / skip    the in-flight token is the last: num_output + j + 1 >= max_tokens, or the
//                  sequence nears max_model_len (x + j >= L - 2, one step early);
//   new block      x + j + 1 > table blocks * block_size;
//   cached block   x + j >= (cached blocks + 1) * block_size (prefix caching on);
//   hashed block   x + j + 1 >= next_block_hash_tokens (hashing on).
// At its event step r is settled first and then runs the general code of both halves, so an
// early prediction costs time, never exactness.
#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "kvsim/sim/sched/scheduler.h"

namespace kvsim {

bool Scheduler::steady_skips(const Request& r) const {
  // schedule_running's two reasons to pass over a running request, for a steady one (n = 1
  // before the caps; the token budget never binds: max_num_batched_tokens >= max_num_seqs).
  if (r.num_output_placeholders > 0 &&
      int64_t{r.num_computed_tokens} + 2 - r.num_output_placeholders >=
          int64_t{r.num_prompt_tokens} + r.max_tokens) {
    return true;
  }
  return int64_t{config_.max_model_len} - r.num_computed_tokens - 1 <= 0;
}

int64_t Scheduler::steady_next_event(const Request& r) const {
  const std::optional<KVCacheManager::HeldBlocksView> held = kv_.held_blocks(r.request_id);
  if (!held) {
    throw std::logic_error(
        fmt::format("steady decode: running request {} holds no table", r.request_id));
  }
  const int64_t x = r.num_computed_tokens;
  const int64_t bs = config_.block_size;
  int64_t j = int64_t{r.max_tokens} - 1 - r.num_output_tokens;
  j = std::min(j, int64_t{config_.max_model_len} - 2 - x);
  j = std::min(j, int64_t{held->num_blocks} * bs - x);
  if (config_.enable_prefix_caching)
    j = std::min(j, (int64_t{held->num_cached_block} + 1) * bs - x);
  if (r.hash_block_size > 0) j = std::min(j, int64_t{r.next_block_hash_tokens} - 1 - x);
  return steady_steps_ + std::max<int64_t>(j, 0);
}

void Scheduler::steady_settle(size_t i) {
  const int64_t k = steady_steps_ - steady_base_[i];
  if (k == 0) return;
  Request& r = *running_[i];
  r.num_computed_tokens += static_cast<int32_t>(k);
  r.num_output_tokens += static_cast<int32_t>(k);
  kv_.settle_held_tokens(r.request_id, static_cast<int32_t>(k));
  steady_base_[i] = steady_steps_;
  if (r.num_tokens() >= r.next_block_hash_tokens) {
    throw std::logic_error(fmt::format(
        "steady decode: request {} passed a block-hash boundary without an event (tokens {})",
        r.request_id, r.num_tokens()));
  }
}

bool Scheduler::begin_steady_decode() {
  if (steady_active_) return true;
  const SchedulerConfig& c = config_;
  if (!c.async_scheduling || c.policy != SchedulingPolicy::FCFS ||
      c.preemption_mode != PreemptionMode::RECOMPUTE || kv_.coordinator() != nullptr ||
      c.num_lookahead_tokens != 0) {
    return false;
  }
  if (!waiting_.empty() || running_.empty() || num_pending_outputs() != 1) return false;
  const SchedulerOutput& pending = outputs_[static_cast<size_t>(first_pending_step_ % 2)];
  if (pending.scheduled.size() != running_.size()) return false;
  int64_t sum_computed = 0;
  for (size_t k = 0; k < running_.size(); ++k) {
    const ScheduledRequest& s = pending.scheduled[k];
    const Request& r = *running_[k];
    if (s.request_id != r.request_id || s.num_tokens != 1 || !s.is_decode || s.is_prefill_chunk ||
        r.status != RequestStatus::RUNNING || r.num_output_tokens < 1 ||
        r.num_computed_tokens != r.num_tokens() || r.num_output_placeholders != 1 ||
        r.num_in_flight_tokens != 1 || s.num_computed_tokens + 1 != r.num_computed_tokens) {
      return false;
    }
    const std::optional<KVCacheManager::HeldBlocksView> held = kv_.held_blocks(r.request_id);
    if (!held || held->held_tokens != r.num_computed_tokens ||
        int64_t{held->num_blocks} * config_.block_size < r.num_computed_tokens) {
      return false;
    }
    sum_computed += r.num_computed_tokens;
  }
  steady_active_ = true;
  steady_rebuild_pending_ = false;
  steady_steps_ = 0;
  steady_sum_computed_ = sum_computed;
  steady_base_.assign(running_.size(), 0);
  steady_next_event_.resize(running_.size());
  for (size_t k = 0; k < running_.size(); ++k) {
    steady_next_event_[k] = steady_next_event(*running_[k]);
  }
  return true;
}

const SchedulerOutput* Scheduler::steady_schedule(SteadyBatch& b) {
  if (!steady_active_ || num_pending_outputs() != 1) {
    throw std::logic_error("Scheduler::steady_schedule outside a steady-decode step");
  }
  const int64_t now = steady_steps_;
  const size_t n = running_.size();
  steady_events_.clear();
  int32_t skipped = 0;
  int64_t skipped_computed = 0;
  int64_t allocations = 0;
  for (size_t i = 0; i < n; ++i) {
    if (steady_next_event_[i] > now) continue;
    steady_settle(i);
    steady_events_.push_back(static_cast<int32_t>(i));
    const Request& r = *running_[i];
    if (steady_skips(r)) {
      ++skipped;
      skipped_computed += r.num_computed_tokens;
    } else if (int64_t{r.num_computed_tokens} + 1 >
               int64_t{kv_.held_blocks(r.request_id).value().num_blocks} * config_.block_size) {
      ++allocations;
    }
  }
  // A running request's allocation fails only when the free blocks run out (no watermark, no
  // prefix hits): with at least one free block per new block every allocation of the step
  // succeeds, in any order. Otherwise the general path preempts.
  const auto num_scheduled = static_cast<int32_t>(n) - skipped;
  if (num_scheduled == 0 || allocations > kv_.num_free_blocks()) return nullptr;

  output_ = &outputs_[static_cast<size_t>(step_ % 2)];
  output_->clear();
  output_->finished_req_ids.swap(finished_pending_);
  output_->step_index = step_++;
  steady_allocs_.clear();
  int32_t scheduled_events = 0;
  for (const int32_t i : steady_events_) {
    Request& r = *running_[static_cast<size_t>(i)];
    if (steady_skips(r)) continue;
    ++scheduled_events;
    // schedule_running's body for n = 1.
    if (!kv_.allocate_slots_in_held_blocks(r, 1, 0)) {
      AllocateSlotsArgs args;
      args.num_new_tokens = 1;
      const std::optional<std::span<const BlockId>> blocks = kv_.allocate_slots(r, args);
      if (!blocks) {
        throw std::logic_error(fmt::format(
            "steady decode: request {} failed to allocate after the capacity check", r.request_id));
      }
      output_->new_block_ids.insert(output_->new_block_ids.end(), blocks->begin(), blocks->end());
      steady_allocs_.push_back({r.request_id, static_cast<int32_t>(blocks->size())});
    }
    // _update_after_schedule of a decode.
    r.num_computed_tokens += 1;
    r.num_in_flight_tokens += 1;
    r.num_output_placeholders += 1;
  }
  // Everybody else: held tokens + 1 each (their own counts are settled later).
  kv_.add_lazy_held_tokens(static_cast<int64_t>(num_scheduled) - scheduled_events);
  output_->total_num_scheduled_tokens = num_scheduled;
  output_->num_decode_tokens = num_scheduled;
  output_->admission_stop = AdmissionStop::QUEUE_EMPTY;
  b.step_index = output_->step_index;
  b.num_scheduled = num_scheduled;
  b.sum_context_tokens = steady_sum_computed_ - skipped_computed;
  b.num_new_blocks = static_cast<int32_t>(output_->new_block_ids.size());
  // After the step every scheduled request is one further; the skipped ones finish below.
  steady_sum_computed_ = b.sum_context_tokens + num_scheduled;
  steady_rebuild_pending_ = true;
  return output_;
}

void Scheduler::steady_update(SteadyBatch& b) {
  if (!steady_active_ || num_pending_outputs() != 2) {
    throw std::logic_error("Scheduler::steady_update without a steady schedule");
  }
  ++first_pending_step_;
  b.finished.clear();
  const int64_t done = steady_steps_ + 1;
  for (const int32_t i : steady_events_) {
    Request& r = *running_[static_cast<size_t>(i)];
    // update_from_output's body for a sampled token of a running request.
    r.num_in_flight_tokens -= 1;
    r.append_output_tokens(1);
    r.num_output_placeholders -= 1;
    if (r.num_output_placeholders < 0) {
      throw std::logic_error(
          fmt::format("steady decode: request {} has no placeholder", r.request_id));
    }
    kv_.cache_blocks(r, int64_t{r.num_computed_tokens} - r.num_output_placeholders);
    steady_base_[static_cast<size_t>(i)] = done;
    if (r.num_output_tokens >= r.max_tokens || r.num_tokens() >= config_.max_model_len) {
      r.status = RequestStatus::FINISHED_LENGTH_CAPPED;
      const auto freed = static_cast<int32_t>(kv_.num_blocks_held(r.request_id));
      kv_.free(r);
      finished_pending_.push_back(r.request_id);
      by_id_[static_cast<size_t>(r.request_id)] = nullptr;
      b.finished.push_back({r.request_id, freed});
    }
  }
  steady_steps_ = done;
  if (!b.finished.empty()) {
    // Compact running_ and its parallel arrays in place, keeping the order.
    size_t w = 0;
    for (size_t i = 0; i < running_.size(); ++i) {
      if (is_finished(running_[i]->status)) continue;
      running_[w] = running_[i];
      steady_base_[w] = steady_base_[i];
      steady_next_event_[w] = steady_next_event_[i];
      ++w;
    }
    running_.resize(w);
    steady_base_.resize(w);
    steady_next_event_.resize(w);
  }
  // The event requests still running are exact now: predict their next event. (Their running
  // indices moved when a request before them finished, so look them up by the base just set.)
  for (size_t i = 0; i < running_.size(); ++i) {
    if (steady_base_[i] == done) {
      steady_next_event_[i] = steady_next_event(*running_[i]);
    }
  }
}

void Scheduler::end_steady_decode() {
  if (!steady_active_) return;
  if (num_pending_outputs() != 1) {
    throw std::logic_error("Scheduler::end_steady_decode inside a steady-decode step");
  }
  for (size_t i = 0; i < running_.size(); ++i) steady_settle(i);
  steady_active_ = false;
  if (steady_rebuild_pending_) {
    // The pending batch s scheduled every request still running (the skipped ones finished in
    // the same step), one decode each at num_computed - 1: rebuild its entries as add_scheduled
    // would have, with the new block ids steady_schedule() recorded in running order.
    SchedulerOutput& p = outputs_[static_cast<size_t>(first_pending_step_ % 2)];
    p.scheduled.clear();
    size_t a = 0;
    int32_t begin = 0;
    for (const Request* r : running_) {
      ScheduledRequest& s = p.scheduled.emplace_back();
      s.request_id = r->request_id;
      s.num_tokens = 1;
      s.num_computed_tokens = r->num_computed_tokens - 1;
      s.new_blocks_begin = begin;
      if (a < steady_allocs_.size() && steady_allocs_[a].request_id == r->request_id) {
        s.new_blocks_count = steady_allocs_[a].count;
        begin += s.new_blocks_count;
        ++a;
      }
      s.is_decode = true;
      s.num_output_placeholders = 1;
    }
    if (a != steady_allocs_.size() || static_cast<size_t>(begin) != p.new_block_ids.size()) {
      throw std::logic_error("steady decode: the pending batch's new blocks do not match");
    }
  }
  steady_rebuild_pending_ = false;
  steady_base_.clear();
  steady_next_event_.clear();
  steady_events_.clear();
  steady_allocs_.clear();
}

}  // namespace kvsim
