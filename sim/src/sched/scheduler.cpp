#include "kvsim/sim/sched/scheduler.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "kvsim/core/param.h"

namespace kvsim {
namespace {

KVCacheManagerConfig kv_config(const SchedulerConfig& c) {
  KVCacheManagerConfig k;
  k.num_gpu_blocks = c.num_gpu_blocks;
  k.block_size = c.block_size;
  k.max_model_len = c.max_model_len;
  k.enable_caching = c.enable_prefix_caching;
  k.watermark = c.watermark;
  k.kv_cache_config = c.kv_cache_config;
  // vLLM VllmConfig.max_in_flight_tokens: every concurrent batch may hold a full budget.
  k.max_in_flight_tokens = int64_t{max_concurrent_batches(c)} * int64_t{c.max_num_batched_tokens};
  // Request salts are request-unique and the scheduler looks hashes up only for the request
  // that owns them, so salted blocks can stay out of the prefix map until a preemption.
  k.defer_private_block_hashes = c.defer_private_block_hashes;
  k.prefix_cache_stats_at_admission = c.behavior.prefix_cache_stats_at_admission;
  k.prefix_cache_retention_interval = c.prefix_cache_retention_interval.value_or(
      c.behavior.default_prefix_cache_retention_interval);
  return k;
}

void require(bool ok, const char* field, const std::string& why) {
  if (!ok) throw std::invalid_argument(fmt::format("scheduler config: {} {}", field, why));
}

}  // namespace

void validate(const SchedulerConfig& c) {
  require(c.max_num_batched_tokens >= 1, "max_num_batched_tokens",
          fmt::format("must be >= 1 (got {})", c.max_num_batched_tokens));
  require(c.max_num_seqs >= 1, "max_num_seqs",
          fmt::format("must be >= 1 (got {})", c.max_num_seqs));
  require(
      c.max_num_batched_tokens >= c.max_num_seqs, "max_num_batched_tokens",
      fmt::format("({}) must be >= max_num_seqs ({})", c.max_num_batched_tokens, c.max_num_seqs));
  require(c.long_prefill_token_threshold >= 0, "long_prefill_token_threshold",
          fmt::format("must be >= 0 (got {})", c.long_prefill_token_threshold));
  require(c.watermark >= 0.0 && c.watermark < 1.0, "watermark",
          fmt::format("must be in [0, 1) (got {})", c.watermark));
  require(c.num_lookahead_tokens >= 0, "num_lookahead_tokens",
          fmt::format("must be >= 0 (got {})", c.num_lookahead_tokens));
  require(c.max_model_len >= 1, "max_model_len",
          fmt::format("must be >= 1 (got {})", c.max_model_len));
  require(c.block_size >= 1, "block_size", fmt::format("must be >= 1 (got {})", c.block_size));
  require(c.num_gpu_blocks >= 1, "num_gpu_blocks",
          fmt::format("must be >= 1 (got {})", c.num_gpu_blocks));
  require(c.num_host_swap_slots >= 0, "num_host_swap_slots",
          fmt::format("must be >= 0 (got {})", c.num_host_swap_slots));
  // Swap is vLLM V0's; V0 never scheduled asynchronously and v1 (which does) has no swap, so
  // there is no reference behaviour for a victim whose KV is still being written by the batch
  // in flight.
  require(!(c.async_scheduling && c.preemption_mode == PreemptionMode::SWAP), "preemption_mode",
          "swap requires sync scheduling (" + param_flag("async_scheduling", false) +
              "): vLLM V0's swap never ran with async scheduling");
  const bool hybrid_layout =
      !c.kv_cache_config.kv_cache_groups.empty() &&
      (c.kv_cache_config.kv_cache_groups.size() > 1 ||
       c.kv_cache_config.kv_cache_groups[0].kv_cache_spec.kind != KVCacheSpecKind::kFullAttention);
  require(!(hybrid_layout && c.preemption_mode == PreemptionMode::SWAP), "preemption_mode",
          "swap needs a single full-attention KV cache group (kvsim does not swap per-group "
          "tables)");
  // The engine arguments only some releases have.
  const VllmBehavior& b = c.behavior;
  const auto missing = [&b](std::string_view id) {
    return fmt::format("{} is not an engine argument of vLLM {} (it is 0.33's; choose {})",
                       param(id), to_string(b.version), param("vllm_version", "0.33"));
  };
  if (c.max_num_active_seqs != 0) {
    if (!b.has_max_num_active_seqs) throw std::invalid_argument(missing("max_num_active_seqs"));
    // vLLM 0.33 config/scheduler.py: ge=1, and not above max_num_seqs.
    if (c.max_num_active_seqs < 1 || c.max_num_active_seqs > c.max_num_seqs) {
      throw std::invalid_argument(fmt::format("{} ({}) must be in [1, max_num_seqs ({})]",
                                              param("max_num_active_seqs"), c.max_num_active_seqs,
                                              c.max_num_seqs));
    }
  }
  if (c.long_prefill_token_threshold_adaptive && !b.has_long_prefill_token_threshold_adaptive) {
    throw std::invalid_argument(missing("long_prefill_token_threshold_adaptive"));
  }
  if (c.prefix_cache_retention_interval && *c.prefix_cache_retention_interval < -1) {
    throw std::invalid_argument(fmt::format("{} must be >= 0, or none (got {})",
                                            param("prefix_cache_retention_interval"),
                                            *c.prefix_cache_retention_interval));
  }
  // vLLM 0.33 SchedulerConfig.verify_max_model_len (0.26 only with partial prefills, which kvsim
  // does not take).
  if (b.threshold_capped_by_max_model_len && c.long_prefill_token_threshold > c.max_model_len) {
    throw std::invalid_argument(fmt::format("{} ({}) cannot be greater than the max_model_len ({})",
                                            param("long_prefill_token_threshold"),
                                            c.long_prefill_token_threshold, c.max_model_len));
  }
  // vLLM SchedulerConfig.verify: without chunked prefill a max_model_len prompt must fit the
  // budget.
  require(c.enable_chunked_prefill || c.max_num_batched_tokens >= c.max_model_len,
          "max_num_batched_tokens",
          fmt::format("({}) is smaller than max_model_len ({}) with chunked prefill disabled; "
                      "raise it or enable chunked prefill",
                      c.max_num_batched_tokens, c.max_model_len));
}

std::string_view to_string(RejectReason r) {
  switch (r) {
    case RejectReason::EMPTY_PROMPT:
      return "empty_prompt";
    case RejectReason::PROMPT_TOO_LONG:
      return "prompt_ge_max_model_len";
    case RejectReason::PROMPT_EXCEEDS_POOL:
      return "prompt_exceeds_kv_pool";
    case RejectReason::NEVER_ADMITTABLE:
      return "never_admittable";
    case RejectReason::OUTGREW_POOL:
      return "outgrew_kv_pool";
  }
  return "unknown";
}

std::string_view to_string(PreemptionMode m) {
  return m == PreemptionMode::SWAP ? "swap" : "recompute";
}

void SchedulerOutput::clear() {
  scheduled.clear();
  new_block_ids.clear();
  new_block_group_ends.clear();
  preempted_req_ids.clear();
  finished_req_ids.clear();
  aborted_req_ids.clear();
  swap_out.clear();
  swap_in.clear();
  swapped_out_req_ids.clear();
  swapped_in_req_ids.clear();
  num_swap_fallbacks = 0;
  implicit_decodes = 0;
  implicit_context_tokens = 0;
  implicit_new_blocks = 0;
  finished_in_update.clear();
  total_num_scheduled_tokens = 0;
  num_prefill_tokens = 0;
  num_decode_tokens = 0;
  admission_stop = AdmissionStop::QUEUE_EMPTY;
}

Scheduler::Scheduler(const SchedulerConfig& config)
    : config_((validate(config), config)), kv_(kv_config(config)), waiting_(config.policy) {
  lazy_ = config_.lazy_steady_decodes && config_.policy == SchedulingPolicy::FCFS &&
          kv_.coordinator() == nullptr && config_.num_lookahead_tokens == 0;
  lz_cache_marks_ = lazy_ && config_.lazy_cache_marks && !config_.async_scheduling &&
                    config_.enable_prefix_caching && config_.defer_private_block_hashes;
  lz_count_marks_ = lz_cache_marks_ && config_.count_pending_cache_marks;
  agenda_head_.fill(-1);
  if (lz_count_marks_) {
    // Four blocks' steps or more (a mark lies at most a block and two steps ahead).
    const auto slots = std::bit_ceil(static_cast<uint64_t>(4 * config_.block_size + 8));
    lz_marks_.resize(slots);
    lz_marks_mask_ = slots - 1;
  }
  if (config_.preemption_mode == PreemptionMode::SWAP) {
    // Highest slot at the bottom of the stack: slots are handed out 0, 1, 2, ... from the start.
    free_host_slots_.resize(static_cast<size_t>(config_.num_host_swap_slots));
    for (size_t i = 0; i < free_host_slots_.size(); ++i) {
      free_host_slots_[i] = config_.num_host_swap_slots - 1 - static_cast<int64_t>(i);
    }
  }
}

std::span<const int64_t> Scheduler::host_slots(int64_t request_id) const {
  if (request_id < 0 || static_cast<size_t>(request_id) >= host_slots_of_.size()) return {};
  return host_slots_of_[static_cast<size_t>(request_id)];
}

int64_t Scheduler::blocks_needed(int64_t tokens) const {
  return kv_.max_blocks_for_sequence(tokens);
}

bool Scheduler::check_new_request(const Request& r, RejectReason* reason) const {
  const int64_t usable_blocks = static_cast<int64_t>(config_.num_gpu_blocks) - 1;
  const int64_t prompt = r.num_prompt_tokens;
  RejectReason why{};
  if (prompt <= 0) {
    why = RejectReason::EMPTY_PROMPT;
  } else if (prompt >= config_.max_model_len) {
    why = RejectReason::PROMPT_TOO_LONG;
  } else if (blocks_needed(prompt + config_.num_lookahead_tokens) > usable_blocks) {
    why = RejectReason::PROMPT_EXCEEDS_POOL;
  } else {
    return true;
  }
  if (reason != nullptr) *reason = why;
  return false;
}

void Scheduler::add_request(Request* r) {
  if (r->request_id < 0) throw std::invalid_argument("add_request: negative request id");
  // Ids index per-request tables; the lazy decodes' (lz_pos_, the agenda) hold them as int32.
  if (r->request_id > INT32_MAX) {
    throw std::invalid_argument(
        fmt::format("add_request: request id {} is above {}", r->request_id, INT32_MAX));
  }
  if (r->status != RequestStatus::WAITING) {
    throw std::invalid_argument(
        fmt::format("add_request: request {} is not WAITING", r->request_id));
  }
  const auto id = static_cast<size_t>(r->request_id);
  if (id >= by_id_.size()) {
    by_id_.resize(std::max(id + 1, by_id_.size() * 2), nullptr);
    scheduled_index_.resize(by_id_.size(), -1);
    if (lazy_) {
      lz_unreported_.resize(by_id_.size());
      lz_pos_.resize(by_id_.size(), -1);
      agenda_links_.resize(by_id_.size());
    }
    if (config_.preemption_mode == PreemptionMode::SWAP) host_slots_of_.resize(by_id_.size());
  }
  if (by_id_[id] != nullptr) {
    throw std::invalid_argument("add_request: request id " + std::to_string(id) +
                                " already queued");
  }
  // A reused id (streaming replays) must come back clean: its previous owner's KV and host
  // slots were released before the id was handed out again (id_reusable).
  if (kv_.num_blocks_held(r->request_id) != 0 || !host_slots(r->request_id).empty()) {
    throw std::logic_error("add_request: request id " + std::to_string(id) +
                           " still holds KV blocks or host slots of an earlier request");
  }
  by_id_[id] = r;
  if (lazy_) lz_unreported_[id] = {};
  if (config_.enable_prefix_caching && r->hash_block_size == 0) {
    // Private hashes are deferred where private blocks stay out of the prefix map.
    r->enable_block_hashing(config_.block_size,
                            config_.defer_private_block_hashes && kv_.coordinator() == nullptr);
  }
  waiting_.add(r);
}

ScheduledRequest& Scheduler::add_scheduled(Request& r, int32_t n,
                                           std::span<const BlockId> new_blocks) {
  // Filled in place: a stack temporary copied into the vector costs a store-forwarding stall per
  // field (narrow stores read back as wide loads), and this runs for every request every step.
  const auto index = static_cast<int32_t>(output_->scheduled.size());
  ScheduledRequest& s = output_->scheduled.emplace_back();
  s.request_id = r.request_id;
  s.num_tokens = n;
  s.num_computed_tokens = r.num_computed_tokens;
  s.new_blocks_begin = static_cast<int32_t>(output_->new_block_ids.size());
  s.new_blocks_count = static_cast<int32_t>(new_blocks.size());
  // Generating the next token from the cache. With async placeholders the sequence is
  // tokens + placeholders long; in sync mode placeholders are 0.
  const int32_t length = r.num_tokens() + r.num_output_placeholders;
  s.is_decode =
      r.num_output_tokens + r.num_output_placeholders > 0 && r.num_computed_tokens == length - 1;
  s.num_output_placeholders = r.num_output_placeholders;
  if (kv_.coordinator() != nullptr) {
    s.group_ends_begin = static_cast<int32_t>(output_->new_block_group_ends.size());
    const std::span<const int32_t> ends = kv_.new_block_group_ends();
    if (new_blocks.empty()) {
      output_->new_block_group_ends.insert(output_->new_block_group_ends.end(),
                                           kv_.num_kv_cache_groups(), 0);
    } else {
      output_->new_block_group_ends.insert(output_->new_block_group_ends.end(), ends.begin(),
                                           ends.end());
    }
  }
  output_->new_block_ids.insert(output_->new_block_ids.end(), new_blocks.begin(), new_blocks.end());
  // Only the PRIORITY victim search reads it (FCFS victims come from the back of running, which
  // this step has not scheduled yet).
  if (config_.policy == SchedulingPolicy::PRIORITY) {
    scheduled_index_[static_cast<size_t>(r.request_id)] = index;
  }
  if (lazy_) s.order_key = lz_[static_cast<size_t>(lz_pos_[static_cast<size_t>(r.request_id)])].key;
  return s;
}

void Scheduler::unschedule(size_t idx, int64_t& token_budget) {
  token_budget += output_->scheduled[idx].num_tokens;
  scheduled_index_[static_cast<size_t>(output_->scheduled[idx].request_id)] = -1;
  output_->scheduled.erase(output_->scheduled.begin() + static_cast<std::ptrdiff_t>(idx));
  for (size_t k = idx; k < output_->scheduled.size(); ++k) {
    scheduled_index_[static_cast<size_t>(output_->scheduled[k].request_id)] =
        static_cast<int32_t>(k);
  }
}

bool Scheduler::try_swap_out(Request& victim) {
  // Only the blocks holding computed KV travel: the table may extend past C (blocks allocated
  // for this step's tokens or lookahead), and those hold nothing yet.
  const int64_t computed = victim.num_computed_tokens;
  if (config_.preemption_mode != PreemptionMode::SWAP || computed == 0) return false;
  const int64_t need = cdiv(computed, config_.block_size);
  if (need > num_free_host_slots()) {
    output_->num_swap_fallbacks += 1;
    return false;
  }
  const std::span<const BlockId> table = kv_.get_block_ids(victim.request_id);
  if (static_cast<int64_t>(table.size()) < need) {
    throw std::logic_error(fmt::format("swap out: request {} has {} computed tokens but {} blocks",
                                       victim.request_id, computed, table.size()));
  }
  std::vector<int64_t>& slots = host_slots_of_[static_cast<size_t>(victim.request_id)];
  slots.clear();
  for (int64_t k = 0; k < need; ++k) {
    const int64_t slot = free_host_slots_.back();
    free_host_slots_.pop_back();
    slots.push_back(slot);
    output_->swap_out.push_back({table[static_cast<size_t>(k)], slot});
  }
  output_->swapped_out_req_ids.push_back(victim.request_id);
  return true;
}

void Scheduler::release_host_slots(Request& r) {
  if (config_.preemption_mode != PreemptionMode::SWAP) return;
  std::vector<int64_t>& slots = host_slots_of_[static_cast<size_t>(r.request_id)];
  // Pushed in reverse so the next swap-out reuses them in the same ascending order.
  for (auto it = slots.rbegin(); it != slots.rend(); ++it) free_host_slots_.push_back(*it);
  slots.clear();
  slots.shrink_to_fit();
}

void Scheduler::swap_in(Request& r, std::span<const BlockId> new_blocks) {
  const std::vector<int64_t>& slots = host_slots_of_[static_cast<size_t>(r.request_id)];
  if (new_blocks.size() < slots.size()) {
    throw std::logic_error(fmt::format("swap in: request {} got {} blocks for {} host slots",
                                       r.request_id, new_blocks.size(), slots.size()));
  }
  for (size_t k = 0; k < slots.size(); ++k) output_->swap_in.push_back({new_blocks[k], slots[k]});
  output_->swapped_in_req_ids.push_back(r.request_id);
  release_host_slots(r);
}

void Scheduler::preempt(Request* victim) {
  // A request that can never complete again (its recompute needs more than N - 1 blocks) would
  // make vLLM re-admit and preempt it forever; kvsim aborts it (docs/scheduler.md §Rejections:
  // never a hang). With the gate on and the sequence itself too large, the gate keeps it waiting
  // and the replay's "nothing runs" rule aborts it later, as that section describes. Swapping
  // does not change this: a resumed request needs its whole table again.
  const int64_t usable = static_cast<int64_t>(config_.num_gpu_blocks) - 1;
  const int64_t tokens = victim->num_tokens();
  const int64_t need = blocks_needed(tokens + config_.num_lookahead_tokens);
  const int64_t need_gate = blocks_needed(tokens);
  const bool gate_holds_it = config_.scheduler_reserve_full_isl && need_gate > usable;
  const bool abort = need > usable && !gate_holds_it;
  // The swap-out entries are emitted before the blocks are freed: they run before this step's
  // writes, so a freed block reused by a later allocation of this step is copied out first.
  const bool swapped = !abort && try_swap_out(*victim);
  // Its private blocks are published now (and it may look its own hashes up when re-admitted).
  victim->materialize_block_hashes();
  kv_.free(*victim);
  victim->status = RequestStatus::PREEMPTED;
  if (!swapped) victim->num_computed_tokens = 0;
  victim->num_preemptions += 1;
  output_->preempted_req_ids.push_back(victim->request_id);
  if (abort) {
    victim->status = RequestStatus::FINISHED_ABORTED;
    by_id_[static_cast<size_t>(victim->request_id)] = nullptr;
    output_->aborted_req_ids.push_back(victim->request_id);
    return;
  }
  waiting_.prepend(victim);
}

bool Scheduler::schedule_running(int64_t& token_budget) {
  bool preempted_any = false;
  const int64_t threshold = step_threshold_;
  size_t i = 0;
  const int64_t batch = output_->step_index;
  int32_t implicit = 0;
  int32_t event_decodes = 0;  // implicit decodes that held their tokens through allocate_slots
  // The least next schedule event of the members the tight loop passes over. Every member left
  // at the end was passed over, or had its event here and was predicted again, so that and the
  // predictions make lz_update_bound_ exact (the update after this schedule then needs no scan).
  int64_t passed_min = INT64_MAX;
  bool rebound = false;
  if (lazy_members_quiet_at(batch) && token_budget >= static_cast<int64_t>(running_.size())) {
    // The loop below would count each member implicitly and end.
    i = running_.size();
    implicit = static_cast<int32_t>(i);
    token_budget -= static_cast<int64_t>(i);
  } else if (lazy_) {
    lz_update_bound_ = INT64_MAX;  // nothing reads it before the end of this call
    rebound = true;
  }
  while (i < running_.size() && token_budget > 0) {
    if (lazy_) {
      // Steady members without an event: one decode token each, no entry, nothing touched.
      // (A tight loop over one array: locals, so that nothing is reloaded per member.)
      const int64_t* const next_sched = lz_next_sched_.data();
      const size_t n = running_.size();
      size_t j = i;
      int64_t budget = token_budget;
      int64_t least = passed_min;
      while (j < n && budget > 0 && next_sched[j] > batch) {
        least = std::min(least, next_sched[j]);
        ++j;
        --budget;
      }
      passed_min = least;
      implicit += static_cast<int32_t>(j - i);
      token_budget = budget;
      i = j;
      if (i >= n || token_budget <= 0) break;
      // A member's event that is still one decode (a new or cached block): it stays a member.
      // Its usual kind, a new block, is served without settling it where the table allows.
      if (lz_[i].member && lazy_light_event(i, batch)) {
        --token_budget;
        ++implicit;
        ++i;
        continue;
      }
      if (lz_[i].member && lazy_schedule_event(i)) {
        --token_budget;
        ++implicit;
        ++event_decodes;
        ++i;
        continue;
      }
      if (lz_[i].member) lazy_depart(i);
    }
    Request* req = running_[i];
    // The next request's fields and block state are read next iteration: start the loads now
    // (the hash map traffic of the previous step has usually evicted them from L1).
    if (!lazy_ && i + 1 < running_.size()) {
      const Request* next = running_[i + 1];
      __builtin_prefetch(next);
      kv_.prefetch_request_state(next->request_id);
    }
    if (in_flight_reaches_max_tokens(*req)) {
      ++i;
      continue;
    }
    int64_t n = static_cast<int64_t>(req->num_tokens()) + req->num_output_placeholders -
                req->num_computed_tokens;
    if (threshold > 0 && n > threshold) n = threshold;
    n = std::min(n, token_budget);
    n = std::min<int64_t>(
        n, static_cast<int64_t>(config_.max_model_len) - req->num_computed_tokens - 1);
    if (n <= 0) {
      ++i;
      continue;
    }
    // The common case (a decode, or a chunk that fits the blocks held): nothing to allocate.
    if (kv_.allocate_slots_in_held_blocks(*req, static_cast<int32_t>(n),
                                          config_.num_lookahead_tokens)) {
      add_scheduled(*req, static_cast<int32_t>(n), {});
      token_budget -= n;
      ++i;
      continue;
    }
    AllocateSlotsArgs args;
    args.num_new_tokens = static_cast<int32_t>(n);
    args.num_lookahead_tokens = config_.num_lookahead_tokens;
    std::optional<std::span<const BlockId>> new_blocks;
    bool can_schedule = true;
    while (true) {
      new_blocks = kv_.allocate_slots(*req, args);
      if (new_blocks) break;
      Request* victim = nullptr;
      if (config_.policy == SchedulingPolicy::FCFS) {
        if (lazy_) lazy_pop_running();
        victim = running_.back();
        running_.pop_back();
      } else {
        // Python max(): the first element with the largest (priority, arrival_time).
        size_t j = 0;
        for (size_t k = 1; k < running_.size(); ++k) {
          const Request* a = running_[k];
          const Request* b = running_[j];
          if (a->priority > b->priority ||
              (a->priority == b->priority && a->arrival_time_ns > b->arrival_time_ns)) {
            j = k;
          }
        }
        victim = running_[j];
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(j));
        const int32_t si = scheduled_index_[static_cast<size_t>(victim->request_id)];
        if (si >= 0) unschedule(static_cast<size_t>(si), token_budget);
        // 0.26 moves the index back only when the victim was scheduled this step (an earlier
        // victim skipped this step makes the loop pass over a request); 0.33 (#49206) for any
        // victim before it. A victim scheduled this step always sits before it.
        if (config_.behavior.priority_preemption_continues ? j < i : si >= 0) --i;
      }
      preempt(victim);
      preempted_any = true;
      if (victim == req) {
        can_schedule = false;
        break;
      }
    }
    if (!can_schedule) {
      // It preempted itself. 0.26 ends the RUNNING loop; 0.33 goes on with the request now at
      // index i (under FCFS the victim was the last one, so the loop ends either way).
      if (config_.behavior.priority_preemption_continues) continue;
      break;
    }
    add_scheduled(*req, static_cast<int32_t>(n), *new_blocks);
    token_budget -= n;
    ++i;
  }
  if (lazy_) {
    // Members the budget did not reach are not in this batch.
    for (size_t k = i; k < running_.size(); ++k) {
      if (lz_[k].member) lazy_depart(k);
    }
    // Every member left was scheduled implicitly, at its exact num_computed_tokens.
    output_->implicit_decodes = implicit;
    output_->implicit_context_tokens = lz_sum_computed_;
    lz_sum_computed_ += implicit;
    kv_.add_lazy_held_tokens(implicit - event_decodes);
    if (rebound && passed_min != INT64_MAX) {
      lz_update_bound_ = std::min(lz_update_bound_, passed_min - lazy_sched_minus_update());
    }
  }
  return preempted_any;
}

void Scheduler::schedule_waiting(int64_t& token_budget) {
  const int64_t threshold = step_threshold_;
  // vLLM 0.33 --max-num-active-seqs caps admissions below max_num_seqs.
  const int64_t max_active =
      config_.max_num_active_seqs > 0 ? config_.max_num_active_seqs : config_.max_num_seqs;
  while (!waiting_.empty()) {
    if (token_budget <= 0) {
      output_->admission_stop = AdmissionStop::TOKEN_BUDGET;
      return;
    }
    if (static_cast<int64_t>(running_.size()) >= max_active) {
      output_->admission_stop = AdmissionStop::MAX_NUM_SEQS;
      return;
    }
    Request* req = waiting_.peek();
    // A swapped-out request keeps num_computed_tokens > 0, so it skips the prefix lookup: its
    // KV comes back from host.
    const bool swapped = !host_slots(req->request_id).empty();
    // A member, so the lookup reuses its capacity instead of allocating per admission.
    ComputedBlocks& hits = computed_blocks_scratch_;
    hits.blocks.clear();
    for (auto& g : hits.group_blocks) g.clear();
    hits.num_computed_tokens = 0;
    int32_t computed = req->num_computed_tokens;
    const bool lookup = computed == 0 && config_.enable_prefix_caching;
    // A request preempted before may hit its own published private blocks: its lookup needs
    // every hash. (A request never preempted cached none of them, so its lookup stops at the
    // first private block either way.)
    if (req->num_preemptions > 0) req->materialize_block_hashes();
    if (lookup) {
      kv_.get_computed_blocks(*req, hits);
      computed = hits.num_computed_tokens;
      req->shared_prefix_boundary = hits.shared_prefix_boundary;
    }
    int64_t n = static_cast<int64_t>(req->num_tokens()) - computed;
    if (threshold > 0 && n > threshold) n = threshold;
    if (!config_.enable_chunked_prefill && n > token_budget) {
      output_->admission_stop = AdmissionStop::TOKEN_BUDGET;
      return;
    }
    n = std::min(n, token_budget);
    AllocateSlotsArgs args;
    args.num_new_tokens = static_cast<int32_t>(n);
    args.num_new_computed_tokens = hits.num_computed_tokens;
    args.new_computed_blocks = hits.blocks;
    args.new_computed_group_blocks = hits.group_blocks;
    args.num_lookahead_tokens = config_.num_lookahead_tokens;
    args.full_sequence_must_fit = config_.scheduler_reserve_full_isl;
    args.has_scheduled_reqs = !running_.empty();
    auto new_blocks = kv_.allocate_slots(*req, args);
    if (!new_blocks) {
      output_->admission_stop = AdmissionStop::KV_CACHE;
      return;
    }
    if (lookup && config_.behavior.prefix_cache_stats_at_admission) {
      kv_.record_prefix_cache_stats(*req, hits.num_computed_tokens);
    }
    waiting_.pop();
    lazy_push_running(req);
    const RequestStatus was = req->status;
    req->num_computed_tokens = computed;
    ScheduledRequest& s = add_scheduled(*req, static_cast<int32_t>(n), *new_blocks);
    s.is_new = was == RequestStatus::WAITING;
    s.is_resumed = was == RequestStatus::PREEMPTED;
    s.num_prefix_hit_tokens = hits.num_computed_tokens;
    s.is_swapped_in = swapped;
    if (swapped) swap_in(*req, *new_blocks);
    req->status = RequestStatus::RUNNING;
    token_budget -= n;
  }
  output_->admission_stop = AdmissionStop::QUEUE_EMPTY;
}

int64_t Scheduler::long_prefill_threshold_for_step() const {
  int64_t threshold = config_.long_prefill_token_threshold;
  // 0 (no threshold) stays 0 whatever the count below.
  if (threshold == 0 || !config_.behavior.lone_request_ignores_threshold) return threshold;
  // vLLM 0.33 counts the requests at the start of the step, before preemptions and admissions.
  const auto requests = static_cast<int64_t>(running_.size() + waiting_.size());
  if (requests <= 1) return 0;
  if (threshold > 0 && config_.long_prefill_token_threshold_adaptive) {
    threshold = std::max<int64_t>(threshold, config_.max_num_batched_tokens / requests);
  }
  return threshold;
}

const SchedulerOutput& Scheduler::schedule() {
  if (num_pending_outputs() >= max_concurrent_batches(config_)) {
    throw std::logic_error(
        config_.async_scheduling
            ? "Scheduler::schedule called with 2 batches pending (async batch queue is full)"
            : "Scheduler::schedule called twice without update_from_output");
  }
  output_ = &outputs_[batch_slot(step_)];
  output_->clear();
  lz_quiet_output_[batch_slot(step_)] = false;
  output_->finished_req_ids.swap(finished_pending_);
  output_->step_index = step_++;
  int64_t token_budget = config_.max_num_batched_tokens;
  step_threshold_ = long_prefill_threshold_for_step();

  const bool preempted = schedule_running(token_budget);
  if (preempted) {
    output_->admission_stop = AdmissionStop::PREEMPTED;
  } else {
    schedule_waiting(token_budget);
  }

  // vLLM _update_after_schedule: the scheduled tokens count as computed from now on; a request
  // that is no longer a prefill chunk samples a token, which async mode counts as a placeholder.
  const bool priority = config_.policy == SchedulingPolicy::PRIORITY;
  for (ScheduledRequest& s : output_->scheduled) {
    if (priority) scheduled_index_[static_cast<size_t>(s.request_id)] = -1;
    Request* r = by_id_[static_cast<size_t>(s.request_id)];
    r->num_computed_tokens += s.num_tokens;
    r->num_in_flight_tokens += s.num_tokens;
    s.is_prefill_chunk = r->num_computed_tokens < r->num_tokens() + r->num_output_placeholders;
    if (config_.async_scheduling && !s.is_prefill_chunk) r->num_output_placeholders += 1;
    output_->total_num_scheduled_tokens += s.num_tokens;
    (s.is_decode ? output_->num_decode_tokens : output_->num_prefill_tokens) += s.num_tokens;
  }
  output_->total_num_scheduled_tokens += output_->implicit_decodes;
  output_->num_decode_tokens += output_->implicit_decodes;
  if (lazy_) {
    lz_sched_done_ = step_;
    if (config_.async_scheduling) lazy_join_admitted(*output_);
  }
  return *output_;
}

void Scheduler::apply_sampled_token(SchedulerOutput& out, ScheduledRequest* s, Request& r,
                                    bool& any_finished_running) {
  const RequestStatus before = r.status;
  r.append_output_tokens(1);
  if (s != nullptr) s->sampled = true;
  const bool stopped =
      r.num_output_tokens >= r.max_tokens || r.num_tokens() >= config_.max_model_len;
  if (config_.async_scheduling) {
    r.num_output_placeholders -= 1;
    if (r.num_output_placeholders < 0) {
      throw std::logic_error(
          fmt::format("update_from_output: request {} has no placeholder", r.request_id));
    }
    // AsyncScheduler: cache the blocks the arrived token completed (a preempted request
    // holds no blocks).
    if (before == RequestStatus::RUNNING) {
      kv_.cache_blocks(r, int64_t{r.num_computed_tokens} - r.num_output_placeholders);
    }
  }
  if (!stopped) return;
  r.status = RequestStatus::FINISHED_LENGTH_CAPPED;
  const auto freed = static_cast<int32_t>(kv_.num_blocks_held(r.request_id));
  kv_.free(r);
  if (s != nullptr) {
    s->num_freed_blocks = freed;
    s->finished = true;
  }
  out.finished_in_update.push_back({r.request_id, freed});
  finished_pending_.push_back(r.request_id);
  by_id_[static_cast<size_t>(r.request_id)] = nullptr;
  if (before == RequestStatus::RUNNING) {
    any_finished_running = true;
    if (lazy_) {
      // Compaction reads the flags, not every running request's status.
      const auto pos = static_cast<size_t>(lz_pos_[static_cast<size_t>(r.request_id)]);
      lz_[pos].finished = true;
      lz_first_finished_ = std::min(lz_first_finished_, pos);
    }
  } else {
    // Async only: preempted while its last token was in flight (vLLM stopped_preempted_reqs).
    waiting_.remove(&r);
  }
}

const SchedulerOutput& Scheduler::update_from_output() {
  if (num_pending_outputs() == 0) {
    throw std::logic_error("Scheduler::update_from_output without a pending schedule");
  }
  const int64_t batch = first_pending_step_;
  SchedulerOutput& out = outputs_[batch_slot(batch)];
  lz_quiet_output_[batch_slot(batch)] = false;
  ++first_pending_step_;
  out.finished_in_update.clear();
  bool any_finished_running = false;
  const size_t num_scheduled = out.scheduled.size();
  if (lazy_) {
    // The batch in order: its entries, merged by running-order key with its implicit decodes
    // that need the general code now - members with an update event, and former members that
    // departed after it was scheduled. Everybody else's token is the lazy clock's.
    lz_items_.clear();
    lz_processed_.clear();
    std::vector<LazyDeparted>& departed = lz_departed_[batch_slot(batch)];
    // Victims depart from the back of running: sort into running order.
    std::sort(departed.begin(), departed.end(),
              [](const LazyDeparted& a, const LazyDeparted& b) { return a.key < b.key; });
    size_t d = 0;
    // Below the bound no member has an event here (most updates): no scan. A scan makes the
    // bound exact over the members it leaves alone; the others are predicted again (or leave)
    // before this update returns, which lowers it as needed.
    if (batch >= lz_update_bound_) {
      const int64_t* const next_update = lz_next_update_.data();
      const size_t n = running_.size();
      int64_t bound = INT64_MAX;
      for (size_t i = 0; i < n; ++i) {
        if (next_update[i] > batch || lz_[i].su > batch) {
          bound = std::min(bound, next_update[i]);
          continue;
        }
        while (d < departed.size() && departed[d].key < lz_[i].key) {
          lz_items_.push_back({departed[d].key, departed[d].request, -1});
          ++d;
        }
        lz_items_.push_back({lz_[i].key, running_[i], static_cast<int32_t>(i)});
      }
      lz_update_bound_ = bound;
    }
    for (; d < departed.size(); ++d)
      lz_items_.push_back({departed[d].key, departed[d].request, -1});
    departed.clear();
    size_t it = 0;
    auto apply_item = [&](const LazyUpdateItem& item) {
      if (item.running_index >= 0) {
        lazy_settle(static_cast<size_t>(item.running_index));
        lz_[static_cast<size_t>(item.running_index)].su = batch + 1;
      }
      Request& r = *item.request;
      // A departed victim aborted at preemption: finished meanwhile, as an entry would be.
      if (by_id_[static_cast<size_t>(r.request_id)] == nullptr) return;
      r.num_in_flight_tokens -= 1;
      apply_sampled_token(out, nullptr, r, any_finished_running);
      lz_processed_.push_back(r.request_id);
    };
    for (size_t k = 0; k < num_scheduled; ++k) {
      ScheduledRequest& s = out.scheduled[k];
      while (it < lz_items_.size() && lz_items_[it].key < s.order_key) apply_item(lz_items_[it++]);
      const auto id = static_cast<size_t>(s.request_id);
      Request* r = by_id_[id];
      if (r == nullptr) continue;
      // A member with an entry (scheduled before it joined): exact before the general code.
      if (const int32_t pos = lz_pos_[id]; pos >= 0 && lz_[static_cast<size_t>(pos)].member) {
        lazy_settle(static_cast<size_t>(pos));
      }
      r->num_in_flight_tokens -= s.num_tokens;
      if (s.is_prefill_chunk) continue;
      apply_sampled_token(out, &s, *r, any_finished_running);
      lz_processed_.push_back(r->request_id);
    }
    while (it < lz_items_.size()) apply_item(lz_items_[it++]);
    lazy_after_update();
    if (any_finished_running) lazy_compact_running();
    lz_upd_done_ = first_pending_step_;
    return out;
  }
  for (size_t k = 0; k < num_scheduled; ++k) {
    ScheduledRequest& s = out.scheduled[k];
    // As in the RUNNING loop: start loading the next request's fields and block state.
    if (k + 1 < num_scheduled) {
      const int64_t next_id = out.scheduled[k + 1].request_id;
      __builtin_prefetch(by_id_[static_cast<size_t>(next_id)]);
      kv_.prefetch_request_state(next_id);
    }
    const auto id = static_cast<size_t>(s.request_id);
    Request* r = by_id_[id];
    if (r != nullptr) r->num_in_flight_tokens -= s.num_tokens;
    // Finished meanwhile (async: aborted while its batch was in flight), or a partial prefill.
    if (r == nullptr || s.is_prefill_chunk) continue;
    apply_sampled_token(out, &s, *r, any_finished_running);
  }
  if (any_finished_running) {
    std::erase_if(running_, [](const Request* r) { return is_finished(r->status); });
  }
  return out;
}

Request* Scheduler::abort_waiting_head() {
  Request* r = waiting_.pop();
  kv_.free(*r);
  release_host_slots(*r);
  r->status = RequestStatus::FINISHED_ABORTED;
  by_id_[static_cast<size_t>(r->request_id)] = nullptr;
  return r;
}

}  // namespace kvsim
