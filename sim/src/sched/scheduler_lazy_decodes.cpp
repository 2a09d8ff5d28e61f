// Lazy steady decodes: the bookkeeping behind SchedulerConfig::lazy_steady_decodes
// (scheduler.h). schedule_running() and update_from_output() call these.
//
// A member r was exact when it joined (or was last settled) and is implicitly in every batch
// scheduled since its first implicit batch sb. Two lazy clocks move it: every completed
// schedule() since sc added one decode token (num_computed, in flight, placeholders and its
// table's held tokens + 1), every completed update of an implicit batch since su appended one
// token (num_output + 1, in flight and placeholders - 1). lazy_settle() folds both into the
// request. Between calls a member is always in the same phase: num_computed == num_tokens == x,
// one placeholder, one token in flight. Its next event step j (from the next schedule on; step
// j = schedule(S + j), then update(S - 1 + j)) is the first at which any of these could happen:
//   last token    num_output + j + 1 >= max_tokens: the RUNNING loop skips it, the update
//                 finishes it;
//   length        x + j >= max_model_len - 2 (one step early);
//   new block     x + j + 1 > table blocks * block_size;
//   cached block  x + j >= (cached blocks + 1) * block_size (caching on: allocate_slots and the
//                 update's cache_blocks cache it).
// Hash boundaries are not events: settling hashes (or, deferring, counts) the blocks the folded
// tokens completed, and every reader of those hashes - the member's cache events, a
// preemption - settles it first.
// Without one, both halves of the step do exactly what the lazy clocks do. With one, the member
// departs in that schedule() (settled; it runs the general code; its implicit token in the
// pending batch goes to that batch's departed list) or, for an update-only event, is settled and
// updated in place. The update that applies a member's or departed member's token re-predicts
// it, or makes it a member again if it is in the steady phase (lazy_after_update).
// Sync scheduling (issue 27) uses the same clocks with its own phase: between steps a member has
// num_computed == num_tokens - 1, no placeholder and nothing in flight; step j is schedule(S + j)
// then update(S + j); the schedule's allocation caches x + j + 1 tokens (x computed), so a cached
// block comes one token earlier; and a decode whose update would stop the request (max_tokens,
// max_model_len) departs at its schedule, so that update runs the general code - or, in a
// quiet run (quiet_run_step(true)), its update's part is quiet_run_finish()
// (LazyRunning::quiet_finish).
#include <algorithm>
#include <bit>
#include <climits>
#include <stdexcept>

#include <fmt/format.h>

#include "kvsim/sim/sched/detail/scheduler_quiet_step.h"
#include "kvsim/sim/sched/scheduler.h"

namespace kvsim {

void Scheduler::lazy_push_running(Request* r) {
  running_.push_back(r);
  if (!lazy_) return;
  lz_next_sched_.push_back(INT64_MIN);
  lz_next_update_.push_back(INT64_MAX);
  LazyRunning l;
  l.key = lz_next_key_++;
  lz_.push_back(l);
  lz_pos_[static_cast<size_t>(r->request_id)] = static_cast<int32_t>(running_.size() - 1);
}

void Scheduler::lazy_pop_running() {
  const size_t back = running_.size() - 1;
  if (lz_[back].member) lazy_depart(back);
  lz_pos_[static_cast<size_t>(running_[back]->request_id)] = -1;
  lz_next_sched_.pop_back();
  lz_next_update_.pop_back();
  lz_.pop_back();
}

void Scheduler::lazy_compact_running() {
  // Everything before the first finished request stays where it is.
  size_t w = std::min(lz_first_finished_, running_.size());
  for (size_t i = w; i < running_.size(); ++i) {
    Request* r = running_[i];
    if (lz_[i].finished) {
      // Finished through the general code or a quiet finish, both of which depart a member
      // first: it is in no agenda list.
      mark_uncount(lz_[i]);
      lz_pos_[static_cast<size_t>(r->request_id)] = -1;
      continue;
    }
    running_[w] = r;
    lz_next_sched_[w] = lz_next_sched_[i];
    lz_next_update_[w] = lz_next_update_[i];
    lz_[w] = lz_[i];
    lz_pos_[static_cast<size_t>(r->request_id)] = static_cast<int32_t>(w);
    ++w;
  }
  lz_first_finished_ = SIZE_MAX;
  running_.resize(w);
  lz_next_sched_.resize(w);
  lz_next_update_.resize(w);
  lz_.resize(w);
}

void Scheduler::lazy_settle(size_t i) {
  LazyRunning& l = lz_[i];
  Request& r = *running_[i];
  const int64_t scheduled = lz_sched_done_ - l.sc;
  if (scheduled > 0) {
    const auto k = static_cast<int32_t>(scheduled);
    r.num_computed_tokens += k;
    r.num_in_flight_tokens += k;
    if (config_.async_scheduling) r.num_output_placeholders += k;
    kv_.settle_held_tokens(r.request_id, k);
    UnreportedTokens& u = lz_unreported_[static_cast<size_t>(r.request_id)];
    u.tokens += k;
    u.end = r.num_computed_tokens;
    mark_uncount(l);
    l.sc = lz_sched_done_;
    mark_count(l);
  }
  const int64_t updated = lz_upd_done_ - l.su;
  if (updated > 0) {
    const auto k = static_cast<int32_t>(updated);
    r.num_output_tokens += k;
    r.num_in_flight_tokens -= k;
    if (config_.async_scheduling) r.num_output_placeholders -= k;
    l.su = lz_upd_done_;
    // Hash boundaries need no event: the blocks decodes complete are private, nothing reads
    // their hashes before this request's next cache event or preemption, and both settle it
    // first. Hashing them now gives the chain appending one token at a time would have (or,
    // deferring, just counts them).
    if (r.num_tokens() >= r.next_block_hash_tokens) r.update_block_hashes();
  }
  // The cache marks the folded allocations made (SchedulerConfig::lazy_cache_marks), after the
  // hashes of the blocks they complete are counted.
  if (lz_cache_marks_) kv_.cache_held_blocks(r);
}

void Scheduler::settle_lazy_decodes() {
  for (size_t i = 0; i < running_.size() && lazy_; ++i) {
    if (lz_[i].member) lazy_settle(i);
  }
}

void Scheduler::lazy_depart(size_t i) {
  lazy_settle(i);
  LazyRunning& l = lz_[i];
  // Called inside schedule(S): the member was implicitly in batch S - 1, which is still pending
  // unless it was updated already.
  const int64_t prev = lz_sched_done_ - 1;
  if (l.sb <= prev && lz_upd_done_ <= prev) {
    lz_departed_[batch_slot(prev)].push_back({l.key, running_[i]});
  }
  mark_uncount(l);
  l.member = false;
  l.mark_batch = INT64_MAX;  // a member again predicts its mark afresh
  l.event_blocks = -1;
  l.quiet_finish = false;
  lazy_set_next_sched(i, static_cast<int32_t>(running_[i]->request_id), INT64_MIN);
  lz_next_update_[i] = INT64_MAX;
  lz_sum_computed_ -= running_[i]->num_computed_tokens;
  --lz_num_members_;
}

bool Scheduler::lazy_skips(const Request& r) const {
  // schedule_running's two reasons to pass over a running request, for a steady one (n = 1
  // before the caps; the loop only runs while the budget is positive).
  if (in_flight_reaches_max_tokens(r)) return true;
  return int64_t{config_.max_model_len} - r.num_computed_tokens - 1 <= 0;
}

bool Scheduler::lazy_schedule_event(size_t i) {
  lazy_settle(i);
  Request& r = *running_[i];
  if (lazy_skips(r)) return false;
  const bool async = config_.async_scheduling;
  // Sync: the update of this batch samples the token scheduled now; if that token stops the
  // request, the update must see an entry (the general code).
  if (!async && (int64_t{r.num_output_tokens} + 1 >= r.max_tokens ||
                 int64_t{r.num_tokens()} + 1 >= config_.max_model_len)) {
    return false;
  }
  // schedule_running's body for n = 1 when the allocation succeeds (a failed one changes
  // nothing; the general code then preempts).
  if (BlockId b = kNullBlockId; kv_.allocate_one_new_block(r, &b)) {
    // The usual event: the decode crosses into a new block.
    output_->new_block_ids.push_back(b);
    output_->implicit_new_blocks += 1;
  } else if (!kv_.allocate_slots_in_held_blocks(r, 1, 0)) {
    AllocateSlotsArgs args;
    args.num_new_tokens = 1;
    const std::optional<std::span<const BlockId>> blocks = kv_.allocate_slots(r, args);
    if (!blocks) return false;
    output_->new_block_ids.insert(output_->new_block_ids.end(), blocks->begin(), blocks->end());
    output_->implicit_new_blocks += static_cast<int32_t>(blocks->size());
  }
  lazy_event_scheduled(i);
  return true;
}

void Scheduler::lazy_event_scheduled(size_t i) {
  Request& r = *running_[i];
  const bool async = config_.async_scheduling;
  // _update_after_schedule, applied here (the lazy clock starts after this batch).
  r.num_computed_tokens += 1;
  r.num_in_flight_tokens += 1;
  if (async) r.num_output_placeholders += 1;
  LazyRunning& l = lz_[i];
  mark_uncount(l);
  l.sc = lz_sched_done_ + 1;
  mark_count(l);
  UnreportedTokens& u = lz_unreported_[static_cast<size_t>(r.request_id)];
  u.tokens += 1;
  u.end = r.num_computed_tokens;
  // Predict from the state after the pending batch's update (num_tokens + 1, one token in
  // flight): that update has nothing to do for it (allocate_slots cached its blocks up to
  // num_tokens, and its last token cannot come there, or the RUNNING loop would have skipped
  // it).
  // Sync: from the state after this batch's update (computed as now, one more output token).
  lazy_predict_from(i, async ? int64_t{r.num_tokens()} + 1 : int64_t{r.num_computed_tokens},
                    int64_t{r.num_output_tokens} + 1, lz_sched_done_ + 1);
}

void Scheduler::lazy_quiet_event(size_t i) {
  lazy_settle(i);
  Request& r = *running_[i];
  // lazy_schedule_event's allocation, its case known from the prediction and checked to fit.
  bool served = false;
  if (lz_[i].event_blocks == 1) {
    BlockId b = kNullBlockId;
    served = kv_.allocate_one_new_block(r, &b);
    if (served) {
      output_->new_block_ids.push_back(b);
      output_->implicit_new_blocks += 1;
    }
  } else {
    served = kv_.allocate_slots_in_held_blocks(r, 1, 0);
  }
  if (!served) {
    throw std::logic_error(fmt::format(
        "lazy decodes: the event of member {} predicted to take {} blocks was not served",
        r.request_id, lz_[i].event_blocks));
  }
  lazy_event_scheduled(i);
}

int64_t Scheduler::lazy_quiet_finish_schedule(size_t i) {
  // schedule_running for a member whose event is its last decode: lazy_schedule_event() refuses
  // it (sync: its update stops it), so it departs and the general code schedules its one token,
  // which allocate_slots holds in its table or in one new block (quiet_finish, finish_blocks),
  // and _update_after_schedule counts it computed.
  const bool new_block = lz_[i].finish_blocks > 0;
  lazy_depart(i);
  Request& r = *running_[i];
  const int64_t context = r.num_computed_tokens;
  // allocate_slots() of its one token: in its table, or (its slot one past the table) the one
  // new block the single path takes, listed in the batch's new blocks at its place.
  BlockId b = kNullBlockId;
  const bool served = new_block
                          ? kv_.allocate_one_new_block(r, &b)
                          : kv_.allocate_slots_in_held_blocks(r, 1, config_.num_lookahead_tokens);
  if (!served) {
    throw std::logic_error(fmt::format(
        "lazy decodes: the last decode of member {} was predicted to take {} new blocks and was "
        "not served",
        r.request_id, lz_[i].finish_blocks));
  }
  if (new_block) output_->new_block_ids.push_back(b);
  r.num_computed_tokens += 1;
  r.num_in_flight_tokens += 1;
  // The engine's record counts it as an entry's token would be (on_step): in
  // take_unreported_tokens(), with the implicit ones.
  UnreportedTokens& u = lz_unreported_[static_cast<size_t>(r.request_id)];
  u.tokens += 1;
  u.end = r.num_computed_tokens;
  lz_quiet_finishers_.push_back(static_cast<uint32_t>(i));
  return context;
}

void Scheduler::lazy_quiet_finish_skip(size_t i) {
  // schedule_running for an async member at its max_tokens stop: lazy_schedule_event() finds
  // the RUNNING loop skipping it (its last token in flight), so it departs (its token in the
  // pending batch goes to that batch's departed list) and the loop passes over it.
  lazy_depart(i);
  if (!in_flight_reaches_max_tokens(*running_[i])) {
    throw std::logic_error(fmt::format(
        "lazy decodes: member {} was predicted to reach max_tokens in flight and did not",
        running_[i]->request_id));
  }
}

void Scheduler::lazy_apply_departed(SchedulerOutput& out, int64_t batch) {
  std::vector<LazyDeparted>& departed = lz_departed_[batch_slot(batch)];
  std::sort(departed.begin(), departed.end(),
            [](const LazyDeparted& a, const LazyDeparted& b) { return a.key < b.key; });
  for (const LazyDeparted& d : departed) {
    lazy_apply_last_token(out, *d.request, "with its token in flight");
  }
  departed.clear();
  lazy_compact_running();
}

void Scheduler::lazy_apply_last_token(SchedulerOutput& out, Request& r, const char* when) {
  // update_from_output()'s part for one token of a request it samples: the token comes out of
  // flight, and it must stop the request (the prediction said so).
  r.num_in_flight_tokens -= 1;
  bool any_finished_running = false;
  apply_sampled_token(out, nullptr, r, any_finished_running);
  if (!is_finished(r.status)) {
    throw std::logic_error(fmt::format(
        "lazy decodes: member {} was predicted to stop {} and did not", r.request_id, when));
  }
}

void Scheduler::quiet_run_finish() {
  // update_from_output() of the quiet step's batch for its finishers' entries (sync: the batch
  // just scheduled): the token sampled, the request stopped (FINISHED_LENGTH_CAPPED), its blocks
  // freed, then running_ compacted. The members had no update event there (each event of the
  // step was predicted again past it), so nothing else in that update changes.
  SchedulerOutput& out = outputs_[batch_slot(first_pending_step_ - 1)];
  for (const uint32_t i : lz_quiet_finishers_) {
    lazy_apply_last_token(out, *running_[i], "at its last decode");
  }
  lz_quiet_finishers_.clear();
  lazy_compact_running();
}

bool Scheduler::lazy_light_event(size_t i, int64_t batch) {
  return lazy_light_event_body(i, batch);
}

const SchedulerOutput* Scheduler::quiet_run_step(bool finishes) {
  return quiet_run_step_inline(finishes);
}

int64_t Scheduler::lazy_count_pending_cache_marks(int64_t batch) const {
  int64_t n = 0;
  for (const LazyRunning& l : lz_) {
    n += static_cast<int64_t>(l.member && l.mark_batch == batch && l.sc <= batch);
  }
  return n;
}

bool Scheduler::quiet_run_possible(bool finishes) const {
  const size_t n = running_.size();
  // What schedule(batch) would find: every running request a member, an empty waiting queue, a
  // budget for every member. (Finished ids left to report go into the first quiet step's output,
  // as schedule() would put them.)
  if (!quiet_step_possible() || n == 0 ||
      config_.max_num_batched_tokens < static_cast<int64_t>(n)) {
    return false;
  }
  // What the update would find: async, the pending batch (batch - 1) without entries or departed
  // members; sync, the batch just scheduled, which has neither. A member's update event is its
  // schedule event's batch minus lazy_sched_minus_update(), and handling the schedule event
  // predicts the member past this update, so members with events here leave it nothing to do.
  const bool async = config_.async_scheduling;
  if (num_pending_outputs() != (async ? 1 : 0)) return false;
  // With finishes, async, that update may have entries (members scheduled before they joined)
  // and departed members: quiet_run_step(true) applies it with update_from_output() itself.
  const auto updated = batch_slot(step_ - 1);
  return !async || finishes ||
         (outputs_[updated].scheduled.empty() && lz_departed_[updated].empty());
}

bool Scheduler::lazy_agenda_holds() const {
  if (!lazy_) return true;
  std::vector<int> seen(running_.size(), 0);
  uint64_t mask = 0;
  for (size_t slot = 0; slot < static_cast<size_t>(kAgendaSteps); ++slot) {
    if (agenda_head_[slot] >= 0) mask |= uint64_t{1} << slot;
    int32_t prev = -1;
    for (int32_t id = agenda_head_[slot]; id >= 0;
         id = agenda_links_[static_cast<size_t>(id)].next) {
      const AgendaLink& link = agenda_links_[static_cast<size_t>(id)];
      if (link.prev != prev) return false;
      prev = id;
      const int32_t pos = lz_pos_[static_cast<size_t>(id)];
      if (pos < 0 || running_[static_cast<size_t>(pos)]->request_id != id) return false;
      const auto k = static_cast<size_t>(pos);
      if (!lz_[k].member || ++seen[k] > 1) return false;
      const int64_t next = lz_next_sched_[k];
      if (next < step_ || agenda_slot(next) != slot) return false;
    }
  }
  for (size_t k = 0; k < running_.size(); ++k) {
    if (seen[k] != (lz_[k].member ? 1 : 0)) return false;
  }
  return mask == agenda_mask_;
}

Scheduler::QuietStep Scheduler::schedule_and_update_if_quiet() {
  if (!quiet_run_possible()) return {};
  const SchedulerOutput* scheduled = quiet_run_step();
  if (scheduled == nullptr) return {};
  const int64_t updated = config_.async_scheduling ? step_ - 2 : step_ - 1;
  return {scheduled, &outputs_[batch_slot(updated)]};
}

bool Scheduler::lazy_is_steady(const Request& r) const {
  if (r.status != RequestStatus::RUNNING || r.num_output_tokens < 1) return false;
  if (config_.async_scheduling) {
    if (r.num_computed_tokens != r.num_tokens() || r.num_output_placeholders != 1 ||
        r.num_in_flight_tokens != 1) {
      return false;
    }
  } else if (r.num_computed_tokens != r.num_tokens() - 1 || r.num_output_placeholders != 0 ||
             r.num_in_flight_tokens != 0) {
    return false;
  }
  const std::optional<KVCacheManager::HeldBlocksView> held = kv_.held_blocks(r.request_id);
  return held && held->held_tokens == r.num_computed_tokens &&
         int64_t{held->num_blocks} * config_.block_size >= r.num_computed_tokens;
}

void Scheduler::lazy_predict(size_t i) {
  const Request& r = *running_[i];
  lazy_predict_from(i, r.num_computed_tokens, r.num_output_tokens, lz_sched_done_);
}

void Scheduler::lazy_predict_from(size_t i, int64_t x, int64_t num_output, int64_t next_schedule) {
  const Request& r = *running_[i];
  const KVCacheManager::HeldBlocksView held = kv_.held_blocks(r.request_id).value();
  const int64_t bs = config_.block_size;
  // The event's kind (LazyRunning::event_blocks): a stop bound reached first or tied, else a
  // new block or, before it, a cached one.
  const int64_t stop_tokens = int64_t{r.max_tokens} - 1 - num_output;
  const int64_t stop = std::min(stop_tokens, int64_t{config_.max_model_len} - 2 - x);
  const int64_t new_block = int64_t{held.num_blocks} * bs - x;
  int64_t j = std::min(stop, new_block);
  lz_[i].stop_batch = next_schedule + stop;
  lz_[i].stop_at_max_tokens = stop_tokens == stop;
  if (config_.async_scheduling) {
    if (config_.enable_prefix_caching) {
      j = std::min(j, (int64_t{held.num_cached_block} + 1) * bs - x);
    }
    lz_[i].event_blocks = j >= stop || j < 0 ? -1 : j == new_block ? 1 : 0;
    // Async: at a max_tokens stop the RUNNING loop skips the member (its last token is in
    // flight) and the pending batch's update finishes it.
    lz_[i].quiet_finish = j >= 0 && j == stop && stop == stop_tokens;
    lz_[i].finish_blocks = 0;
    j = std::max<int64_t>(j, 0);
    lazy_set_next_sched(i, static_cast<int32_t>(r.request_id), next_schedule + j);
    lz_next_update_[i] = next_schedule - 1 + j;
    lz_update_bound_ = std::min(lz_update_bound_, next_schedule - 1 + j);
    return;
  }
  // Sync (x computed, x + 1 tokens): step j is schedule(S + j) then update(S + j). The
  // allocation of schedule(S + j) caches x + j + 1 tokens; its update samples output
  // num_output + j + 1 and makes the sequence x + j + 2 long, which stops it at max_tokens or
  // max_model_len (the schedule event departs then: lazy_schedule_event).
  // With lazy cache marks a private block's mark waits for the next settle: no event.
  const bool lazy_mark = lz_cache_marks_ && held.num_cached_block >= r.first_private_block_hash;
  if (config_.enable_prefix_caching && !lazy_mark) {
    j = std::min(j, (int64_t{held.num_cached_block} + 1) * bs - 1 - x);
  }
  // The schedule whose allocation (x + k + 1 tokens) fills the table, if before the event.
  const int64_t fills = new_block - 1;
  mark_uncount(lz_[i]);
  lz_[i].mark_batch = lazy_mark && fills >= 0 && fills < j ? next_schedule + fills : INT64_MAX;
  mark_count(lz_[i]);
  lz_[i].event_blocks = j >= stop || j < 0 ? -1 : j == new_block ? 1 : 0;
  // The stop is the event (j == stop: the decode of schedule(S + j) is the last); its slot
  // x + j + 1 lies in the table (stop < new_block) or in one new block (stop == new_block).
  lz_[i].quiet_finish = j >= 0 && j == stop;
  lz_[i].finish_blocks = static_cast<int8_t>(j >= 0 && stop == new_block);
  j = std::max<int64_t>(j, 0);
  lazy_set_next_sched(i, static_cast<int32_t>(r.request_id), next_schedule + j);
  lz_next_update_[i] = next_schedule + j;
  lz_update_bound_ = std::min(lz_update_bound_, next_schedule + j);
}

void Scheduler::lazy_after_update() {
  // Still inside update_from_output(batch): lz_upd_done_ is batch, the update completes now.
  const int64_t done = first_pending_step_;
  for (const int64_t id : lz_processed_) {
    const int32_t pos = lz_pos_[static_cast<size_t>(id)];
    if (pos < 0) continue;  // preempted meanwhile
    const auto i = static_cast<size_t>(pos);
    Request& r = *running_[i];
    if (is_finished(r.status)) continue;
    LazyRunning& l = lz_[i];
    if (l.member) {
      // Settled and updated by this update; exact again once the update completes.
      if (l.su < done) l.su = done;
      if (!lazy_is_steady(r)) {
        throw std::logic_error(fmt::format(
            "lazy decodes: member {} left the steady phase in an update", r.request_id));
      }
      lazy_predict(i);
      continue;
    }
    if (!lazy_is_steady(r)) continue;
    // Join: implicitly scheduled from the next schedule() on; the pending batch holds its
    // entry, which the next update applies through the general code.
    l.member = true;
    l.sb = lz_sched_done_;
    l.sc = lz_sched_done_;
    l.su = lz_sched_done_;
    lz_sum_computed_ += r.num_computed_tokens;
    ++lz_num_members_;
    lazy_predict(i);
  }
}

void Scheduler::lazy_join_admitted(const SchedulerOutput& out) {
  // Async: a request whose prompt is now all scheduled (its first token is the pending
  // placeholder) is in the steady phase the lazy clocks assume from the next schedule on -
  // computed == tokens == x, one placeholder - but for the prompt tokens still in flight, which
  // only the update of this batch, through the general code (its entry), takes off. So it joins
  // now: implicitly in the next batch instead of an entry there, the step after this one's
  // schedule being quiet. (A join at the update, lazy_after_update, would leave that entry.)
  for (const ScheduledRequest& s : out.scheduled) {
    if (s.is_prefill_chunk) continue;
    Request* r = by_id_[static_cast<size_t>(s.request_id)];
    const int32_t pos = lz_pos_[static_cast<size_t>(s.request_id)];
    if (r == nullptr || pos < 0 || r->status != RequestStatus::RUNNING) continue;
    const auto i = static_cast<size_t>(pos);
    LazyRunning& l = lz_[i];
    // A fresh admission only (a resumed request's tokens may be recomputed ones), which its
    // first token does not already stop.
    if (l.member || r->num_output_tokens != 0 || r->num_preemptions != 0 || r->max_tokens < 2 ||
        r->num_computed_tokens != r->num_tokens() || r->num_output_placeholders != 1) {
      continue;
    }
    const std::optional<KVCacheManager::HeldBlocksView> held = kv_.held_blocks(r->request_id);
    if (!held || held->held_tokens != r->num_computed_tokens ||
        int64_t{held->num_blocks} * config_.block_size < r->num_computed_tokens) {
      continue;
    }
    l.member = true;
    l.sb = lz_sched_done_;
    l.sc = lz_sched_done_;
    l.su = lz_sched_done_;
    lz_sum_computed_ += r->num_computed_tokens;
    ++lz_num_members_;
    // The canonical state before the next schedule: x = computed, no output yet.
    lazy_predict_from(i, r->num_computed_tokens, 0, lz_sched_done_);
  }
}

bool Scheduler::lazy_marks_hold() const {
  if (!lz_count_marks_) return true;
  if (lz_marks_overflow_) return false;
  std::vector<int32_t> expect(lz_marks_.size(), 0);
  for (size_t k = 0; k < running_.size(); ++k) {
    const LazyRunning& l = lz_[k];
    if (!mark_counted(l)) continue;
    const auto slot = static_cast<size_t>(static_cast<uint64_t>(l.mark_batch) & lz_marks_mask_);
    if (lz_marks_[slot].batch != l.mark_batch) return false;
    ++expect[slot];
  }
  for (size_t slot = 0; slot < lz_marks_.size(); ++slot) {
    if (lz_marks_[slot].count != expect[slot]) return false;
  }
  // Every row's count is the pass over the members' (the rows from the last schedule's on).
  const auto window = static_cast<int64_t>(lz_marks_.size());
  for (int64_t b = std::max<int64_t>(0, step_ - 1); b < step_ + window; ++b) {
    if (lazy_pending_cache_marks(b) != lazy_count_pending_cache_marks(b)) return false;
  }
  return true;
}

}  // namespace kvsim
