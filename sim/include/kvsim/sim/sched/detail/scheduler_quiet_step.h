// Scheduler::quiet_run_step's body, inline, and the helpers it inlines (internal to kvsim_sim).
// Two translation units include it: scheduler_lazy_decodes.cpp (quiet_run_step, the entry point
// for everything else) and replica_engine.cpp, whose run of quiet steps calls
// quiet_run_step_inline so that a step's scheduler half and engine half are one loop body: no
// call, no register spills around it, the step's output fields read where they were computed
// (issue 27). What the functions do is documented at their declarations (scheduler.h).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <stdexcept>

#include "kvsim/sim/sched/scheduler.h"

namespace kvsim {

inline void Scheduler::agenda_link(int32_t id, int64_t step) {
  const size_t slot = agenda_slot(step);
  AgendaLink* const links = agenda_links_.data();
  const int32_t head = agenda_head_[slot];
  links[static_cast<size_t>(id)] = {head, -1};
  if (head >= 0) links[static_cast<size_t>(head)].prev = id;
  agenda_head_[slot] = id;
  agenda_mask_ |= uint64_t{1} << slot;
}

inline void Scheduler::agenda_unlink(int32_t id, int64_t step) {
  AgendaLink* const links = agenda_links_.data();
  const AgendaLink l = links[static_cast<size_t>(id)];
  if (l.next >= 0) links[static_cast<size_t>(l.next)].prev = l.prev;
  if (l.prev >= 0) {
    links[static_cast<size_t>(l.prev)].next = l.next;
  } else {
    const size_t slot = agenda_slot(step);
    agenda_head_[slot] = l.next;
    if (l.next < 0) agenda_mask_ &= ~(uint64_t{1} << slot);
  }
}

inline void Scheduler::lazy_set_next_sched(size_t i, int32_t id, int64_t next) {
  const int64_t old = lz_next_sched_[i];
  if (old != INT64_MIN) agenda_unlink(id, old);
  lz_next_sched_[i] = next;
  if (next != INT64_MIN) agenda_link(id, next);
}

[[gnu::always_inline]] inline bool Scheduler::lazy_light_event_body(size_t i, int64_t batch) {
  LazyRunning& l = lz_[i];
  // Sync with eager cache marks: a cached-block event comes between two new-block events.
  if (l.event_blocks != 1 ||
      (!config_.async_scheduling && config_.enable_prefix_caching && !lz_cache_marks_)) {
    return false;
  }
  BlockId b = kNullBlockId;
  const Request& r = *running_[i];
  if (!kv_.append_block_lazily(r, &b)) return false;
  output_->new_block_ids.push_back(b);
  output_->implicit_new_blocks += 1;
  // lazy_predict after settling: the table now ends block_size tokens later, the block just
  // completed is cached (no cached bound before the new one), and a stop bound reached first or
  // tied wins.
  const int64_t block_end = batch + config_.block_size;
  const int64_t next = std::min(block_end, l.stop_batch);
  l.event_blocks = block_end < l.stop_batch ? 1 : -1;
  // Sync: a stop before block_end is a last decode inside the block just appended, one at it a
  // last decode into a new block. Async: a max_tokens stop is a skip (see lazy_predict_from).
  l.quiet_finish = config_.async_scheduling ? l.stop_at_max_tokens : l.stop_batch <= block_end;
  l.finish_blocks = static_cast<int8_t>(!config_.async_scheduling && l.stop_batch == block_end);
  // Sync with lazy cache marks: the new block fills at block_end - 1 (lazy_predict's rule).
  if (lz_cache_marks_) {
    mark_uncount(l);
    l.mark_batch = block_end - 1 < next ? block_end - 1 : INT64_MAX;
    mark_count(l);
  }
  lazy_set_next_sched(i, static_cast<int32_t>(r.request_id), next);
  lz_next_update_[i] = next - lazy_sched_minus_update();
  lz_update_bound_ = std::min(lz_update_bound_, lz_next_update_[i]);
  return true;
}

// Inline: its one caller is quiet_run_step_inline, every step with events.
[[gnu::always_inline]] inline bool Scheduler::agenda_quiet_events(int64_t batch,
                                                                  int64_t& passed_min,
                                                                  bool finishes) {
  const size_t slot = agenda_slot(batch);  // batch >= 0
  // Locals: the stores into the list could alias the members as far as the compiler knows.
  uint32_t* const e = lz_quiet_buffer();
  const AgendaLink* const links = agenda_links_.data();
  const int32_t* const pos = lz_pos_.data();
  const int64_t* const next_sched = lz_next_sched_.data();
  const LazyRunning* const lz = lz_.data();
  size_t count = 0;
  int64_t blocks = 0;
  bool stays = true;
  bool later = false;  // a member of this list whose event is kAgendaSteps or more steps ahead
  size_t finishers = 0;
  for (int32_t id = agenda_head_[slot]; id >= 0; id = links[static_cast<size_t>(id)].next) {
    const auto i = static_cast<uint32_t>(pos[static_cast<size_t>(id)]);
    if (next_sched[i] != batch) [[unlikely]] {
      later = true;
      continue;
    }
    e[count++] = i;
    const LazyRunning& l = lz[i];
    const int32_t event_blocks = l.event_blocks;
    stays &= event_blocks >= 0 || (finishes && l.quiet_finish);
    finishers += event_blocks < 0 ? 1 : 0;
    blocks += event_blocks >= 0 ? event_blocks : l.finish_blocks;
  }
  lz_quiet_count_ = count;
  // Running order, the order schedule_running serves them in. A step's list is short (one or
  // two members, pushed in reverse): an insertion sort, without std::sort's set-up; long ones
  // sort.
  if (count > 16) {
    std::sort(e, e + count);
  } else {
    for (size_t k = 1; k < count; ++k) {
      const uint32_t v = e[k];
      size_t m = k;
      for (; m > 0 && e[m - 1] > v; --m) e[m] = e[m - 1];
      e[m] = v;
    }
  }
  // A lower bound on the others' next events: the first non-empty list after this step's (its
  // members' events are that step or later ones sharing its list).
  const uint64_t others = agenda_mask_ & ~(uint64_t{1} << slot);
  if (others == 0) {
    passed_min = INT64_MAX;
  } else {
    const auto from = static_cast<int>((slot + 1) % kAgendaSteps);
    passed_min = batch + 1 + std::countr_zero(std::rotr(others, from));
  }
  if (later) passed_min = std::min(passed_min, batch + kAgendaSteps);
  if (config_.async_scheduling && finishers == running_.size()) return false;
  return stays && blocks <= kv_.num_free_blocks();
}

[[gnu::always_inline]] inline const SchedulerOutput* Scheduler::quiet_run_step_inline(
    bool finishes) {
  if (!lz_quiet_finishers_.empty()) [[unlikely]] {
    throw std::logic_error("Scheduler::quiet_run_step: quiet_run_finish() was not called");
  }
  const bool async = config_.async_scheduling;
  const int64_t batch = step_;
  const int64_t updated = async ? batch - 1 : batch;
  const bool events = lz_update_bound_ <= updated;
  // Async: a pending batch with entries or departed members (a run's first step only: later
  // ones update a quiet batch) takes the general update (quiet_run_possible).
  const bool general_update = async && (!outputs_[batch_slot(updated)].scheduled.empty() ||
                                        !lz_departed_[batch_slot(updated)].empty());
  if (general_update && !finishes) return nullptr;
  int64_t passed_min = INT64_MAX;
  if (events && !agenda_quiet_events(batch, passed_min, finishes)) return nullptr;
  // schedule(): every member implicitly, one token each; schedule_running's member loop with
  // every event succeeding (checked above). (step_threshold_ is left alone: only schedule()
  // reads it, after setting it.)
  const auto slot = batch_slot(batch);
  SchedulerOutput& out = outputs_[slot];
  if (lz_quiet_output_[slot]) {
    // Written by the quiet step two before and not since: only these differ from clear()'s.
    out.new_block_ids.clear();
    out.implicit_new_blocks = 0;
    out.finished_req_ids.clear();
    out.finished_in_update.clear();  // an async quiet finish's update wrote it
  } else {
    out.clear();
    lz_quiet_output_[slot] = true;
  }
  // schedule() reports the ids finished since the last one (only a run's first step has any).
  if (!finished_pending_.empty()) out.finished_req_ids.swap(finished_pending_);
  output_ = &out;
  out.step_index = step_++;
  auto implicit = static_cast<int32_t>(running_.size());
  int32_t event_decodes = 0;
  int32_t skipped = 0;           // async finishers: not in this batch
  int64_t finisher_context = 0;  // the finishers' computed tokens before their decodes
  if (events) {
    lz_update_bound_ = INT64_MAX;
    // Each event's new prediction (or departure) moves it in the agenda.
    const uint32_t* const events = lz_quiet_events_.data();
    for (size_t k = 0; k < lz_quiet_count_; ++k) {
      const uint32_t i = events[k];
      if (!lazy_light_event_body(i, batch)) {
        if (lz_[i].event_blocks >= 0) {
          lazy_quiet_event(i);
          ++event_decodes;  // its token is held by the event's allocation
        } else if (!async) {
          finisher_context += lazy_quiet_finish_schedule(i);
          ++event_decodes;
        } else {
          lazy_quiet_finish_skip(i);
          ++skipped;
        }
      }
    }
    if (passed_min != INT64_MAX) {
      lz_update_bound_ = std::min(lz_update_bound_, passed_min - lazy_sched_minus_update());
    }
  }
  implicit -= skipped;
  out.implicit_decodes = implicit;
  // A finisher departed (schedule()'s entry for it): its context is no longer in the members'.
  out.implicit_context_tokens = lz_sum_computed_ + finisher_context;
  lz_sum_computed_ += implicit - static_cast<int64_t>(lz_quiet_finishers_.size());
  kv_.add_lazy_held_tokens(implicit - event_decodes);
  out.admission_stop = AdmissionStop::QUEUE_EMPTY;
  out.total_num_scheduled_tokens = implicit;
  out.num_decode_tokens = implicit;
  lz_sched_done_ = step_;
  // update_from_output(): every token is the lazy clock's. (Its scratch lists, lz_items_ and
  // lz_processed_, are filled and read inside one update: nothing to reset here.)
  if (general_update) {
    // The step's update is the general one (its entries, departed members, finishers and the
    // members' updates it makes exact), which may predict members again or compact running_.
    update_from_output();
  } else {
    outputs_[batch_slot(updated)].finished_in_update.clear();
    if (skipped > 0) {
      // Async: the pending batch's update applies the finishers' last tokens (departed members)
      // as update_from_output() does; they finish, and running_ is compacted.
      lazy_apply_departed(outputs_[batch_slot(updated)], updated);
    }
    ++first_pending_step_;
    lz_upd_done_ = first_pending_step_;
  }
  return &out;
}

}  // namespace kvsim
