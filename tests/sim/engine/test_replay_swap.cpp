// Swap preemption through the replay engine: the StepBatch's swap lists move the right KV, swap
// time is charged exactly, and swap mode never recomputes what it could keep on host.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "kvsim/core/kv_backend.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/traces/trace.h"
#include "random_trace.h"

namespace kvsim {
namespace {

using Owner = std::pair<int64_t, int32_t>;  // (request, position) of the KV a slot holds
constexpr Owner kEmpty{-1, -1};

// A metadata-only twin of the storage backends: it applies swap_out, swap_in and the writes
// in the documented order and checks that every read sees, position by position, the KV its
// request wrote there (possibly in another device block, after a trip through host). With
// prefix caching a hit block holds another request's KV of the same tokens, so only the
// position is compared (`same_request` = false).
class SwapCheckingBackend final : public KvBackend {
 public:
  SwapCheckingBackend(int32_t num_blocks, int32_t block_size, int64_t host_slots,
                      bool same_request = true)
      : bs_(block_size),
        same_request_(same_request),
        device_(static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size), kEmpty),
        host_(static_cast<size_t>(host_slots) * static_cast<size_t>(block_size), kEmpty) {}

  const char* name() const override { return "swap-checking"; }

  StepExecution execute(const StepBatch& b) override {
    ++batches;
    EXPECT_EQ(b.block_size, bs_);
    std::vector<int64_t> out_blocks;
    for (const BlockSwap& s : b.swap_out) {
      EXPECT_GT(s.device_block, 0) << "swap out of the null block";
      out_blocks.push_back(s.device_block);
      move(device_, s.device_block, host_, s.host_slot);
    }
    // Without prefix caching no block is shared, so a step swaps each device block out at most
    // once; with caching two victims of one step may share prefix blocks and each copies them.
    std::sort(out_blocks.begin(), out_blocks.end());
    if (same_request_) {
      EXPECT_EQ(std::adjacent_find(out_blocks.begin(), out_blocks.end()), out_blocks.end());
    }
    for (const BlockSwap& s : b.swap_in) move(host_, s.host_slot, device_, s.device_block);
    swapped_out_blocks += static_cast<int64_t>(b.swap_out.size());
    swapped_in_blocks += static_cast<int64_t>(b.swap_in.size());
    size_t k = 0;
    for (size_t w = 0; w < b.writes.size(); ++w) {
      const TokenWrite& tw = b.writes[w];
      const auto begin = static_cast<size_t>(b.block_table_offsets[w]);
      for (int32_t pos = 0; pos < tw.first_position; ++pos) {
        const Owner o = at(b, begin, pos);
        if (o.second != pos || (same_request_ && o.first != tw.request_id)) ++bad_reads;
      }
      for (int32_t i = 0; i < tw.num_tokens; ++i, ++k) {
        device_[static_cast<size_t>(b.slot_mapping[k])] = {tw.request_id, tw.first_position + i};
      }
    }
    return {};
  }

  int64_t batches = 0;
  int64_t bad_reads = 0;
  int64_t swapped_out_blocks = 0;
  int64_t swapped_in_blocks = 0;

 private:
  Owner at(const StepBatch& b, size_t table_begin, int32_t pos) const {
    const BlockId blk = b.block_tables[table_begin + static_cast<size_t>(pos / bs_)];
    return device_[static_cast<size_t>(blk) * static_cast<size_t>(bs_) +
                   static_cast<size_t>(pos % bs_)];
  }
  void move(const std::vector<Owner>& from, int64_t from_block, std::vector<Owner>& to,
            int64_t to_block) const {
    ASSERT_LE(static_cast<size_t>((from_block + 1) * bs_), from.size());
    ASSERT_LE(static_cast<size_t>((to_block + 1) * bs_), to.size());
    std::copy_n(from.begin() + from_block * bs_, bs_, to.begin() + to_block * bs_);
  }

  int32_t bs_;
  bool same_request_;
  std::vector<Owner> device_;
  std::vector<Owner> host_;
};

// Twelve requests at t = 0 whose decodes outgrow a 24-block pool: preemptions are certain.
Trace starved_trace() {
  Trace t;
  for (int i = 0; i < 12; ++i) {
    TraceRequest r;
    r.input_tokens = 10 + 3 * i;
    r.output_tokens = 20 + (i % 4) * 5;
    t.requests.push_back(r);
  }
  return t;
}

ReplayConfig starved_config(PreemptionMode mode, int64_t host_slots) {
  ReplayConfig c;
  c.scheduler.num_gpu_blocks = 25;  // 24 usable
  c.scheduler.block_size = 4;
  c.scheduler.max_model_len = 128;
  c.scheduler.max_num_batched_tokens = 64;
  c.scheduler.max_num_seqs = 8;
  c.scheduler.enable_prefix_caching = false;
  c.scheduler.preemption_mode = mode;
  c.scheduler.num_host_swap_slots = host_slots;
  c.check_invariants = true;
  // 1 MB per block at 1 GB/s: every swapped block costs exactly 1 ms.
  c.swap_bytes_per_block = 1'000'000;
  c.swap_bandwidth_bytes_per_s = 1e9;
  return c;
}

TEST(ReplaySwap, SwapKeepsKvWhereRecomputeRedoesIt) {
  const Trace t = starved_trace();
  FixedStepTime step(1.0);
  SwapCheckingBackend rb(25, 4, 0);
  const ReplayResult rec = run_replay(starved_config(PreemptionMode::RECOMPUTE, 0), t, rb, step);
  SwapCheckingBackend sb(25, 4, 64);
  const ReplayResult swp = run_replay(starved_config(PreemptionMode::SWAP, 64), t, sb, step);

  ASSERT_GT(rec.summary.preemptions, 0);
  EXPECT_GT(rec.summary.recomputed_tokens, 0);
  EXPECT_EQ(rec.summary.swap_outs + rec.summary.swap_ins + rec.summary.swap_fallbacks, 0);
  EXPECT_EQ(rb.bad_reads, 0);

  EXPECT_EQ(swp.summary.finished, rec.summary.finished);
  EXPECT_EQ(swp.summary.finished, 12);
  ASSERT_GT(swp.summary.preemptions, 0);
  EXPECT_EQ(swp.summary.recomputed_tokens, 0);
  EXPECT_EQ(swp.summary.swap_fallbacks, 0);
  EXPECT_EQ(swp.summary.swap_outs, swp.summary.preemptions);
  EXPECT_EQ(swp.summary.swap_ins, swp.summary.swap_outs);  // every victim came back
  EXPECT_EQ(swp.summary.swap_in_blocks, swp.summary.swap_out_blocks);
  EXPECT_EQ(swp.summary.swap_out_bytes, swp.summary.swap_out_blocks * 1'000'000);
  EXPECT_EQ(sb.bad_reads, 0);
  EXPECT_EQ(sb.swapped_out_blocks, swp.summary.swap_out_blocks);
  EXPECT_EQ(sb.swapped_in_blocks, swp.summary.swap_in_blocks);
  // Swap mode computes each position once: scheduled = Σ (prompt + output - 1).
  int64_t needed = 0;
  for (const RequestRecord& r : swp.requests) {
    needed += r.prompt_tokens + r.output_tokens - 1;
    EXPECT_EQ(r.recomputed_tokens, 0);
    EXPECT_LE(r.swap_outs, r.preemptions);
  }
  EXPECT_EQ(swp.summary.scheduled_tokens, needed);
  EXPECT_LT(swp.summary.scheduled_tokens, rec.summary.scheduled_tokens);
  // 1 ms per scheduled step plus 1 ms per swapped block, exactly.
  const int64_t swapped = swp.summary.swap_out_blocks + swp.summary.swap_in_blocks;
  EXPECT_EQ(swp.summary.swap_ns, swapped * 1'000'000);
  EXPECT_EQ(swp.summary.busy_ns, swp.summary.steps * 1'000'000 + swapped * 1'000'000);
  // The timeline carries the swaps of every step.
  int64_t tl_out = 0;
  int64_t tl_in = 0;
  for (const TimelineRow& row : swp.timeline) {
    tl_out += row.swap_out_blocks;
    tl_in += row.swap_in_blocks;
    EXPECT_LE(row.host_slots_used, 64);
  }
  EXPECT_EQ(tl_out, swp.summary.swap_out_blocks);
  EXPECT_EQ(tl_in, swp.summary.swap_in_blocks);
  EXPECT_GT(swp.summary.peak_host_slots_used, 0);
  EXPECT_EQ(swp.timeline.back().host_slots_used, 0);
}

TEST(ReplaySwap, HostCapacityExhaustionFallsBackToRecompute) {
  const Trace t = starved_trace();
  FixedStepTime step(1.0);
  const int64_t slots = 6;
  SwapCheckingBackend b(25, 4, slots);
  const ReplayResult r = run_replay(starved_config(PreemptionMode::SWAP, slots), t, b, step);
  EXPECT_EQ(r.summary.finished, 12);
  EXPECT_GT(r.summary.swap_fallbacks, 0);
  EXPECT_GT(r.summary.swap_outs, 0);
  EXPECT_EQ(r.summary.swap_outs + r.summary.swap_fallbacks, r.summary.preemptions);
  EXPECT_GT(r.summary.recomputed_tokens, 0);
  EXPECT_LE(r.summary.peak_host_slots_used, slots);
  for (const TimelineRow& row : r.timeline) EXPECT_LE(row.host_slots_used, slots);
  EXPECT_EQ(b.bad_reads, 0);
}

TEST(ReplaySwap, ZeroHostSlotsIsRecompute) {
  const Trace t = starved_trace();
  FixedStepTime step(1.0);
  NullKvBackend null;
  const ReplayResult rec = run_replay(starved_config(PreemptionMode::RECOMPUTE, 0), t, null, step);
  const ReplayResult swp = run_replay(starved_config(PreemptionMode::SWAP, 0), t, null, step);
  EXPECT_EQ(swp.summary.swap_fallbacks, swp.summary.preemptions);
  EXPECT_EQ(swp.summary.swap_outs, 0);
  EXPECT_EQ(swp.summary.sim_ns, rec.summary.sim_ns);
  EXPECT_EQ(swp.summary.scheduled_tokens, rec.summary.scheduled_tokens);
  EXPECT_EQ(swp.summary.recomputed_tokens, rec.summary.recomputed_tokens);
}

TEST(ReplaySwap, BadSwapBandwidthIsRejected) {
  ReplayConfig c = starved_config(PreemptionMode::SWAP, 4);
  c.swap_bandwidth_bytes_per_s = 0;
  FixedStepTime step(1.0);
  NullKvBackend null;
  EXPECT_THROW(run_replay(c, starved_trace(), null, step), std::invalid_argument);
}

// Random small configurations in swap mode: every request ends, reads always see their own KV,
// the allocator's invariants hold after every step (check_invariants), host slots stay bounded.
TEST(ReplaySwapProperties, RandomSmallTraces) {
  FixedStepTime step(1.0);
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    ReplayConfig c;
    SchedulerConfig& s = c.scheduler;
    const int bs_choices[] = {1, 2, 4, 16};
    s.block_size = bs_choices[uni(0, 3)];
    s.max_model_len = uni(8, 96);
    s.num_gpu_blocks = uni(2, 40);
    s.max_num_seqs = uni(1, 8);
    s.max_num_batched_tokens = uni(std::max(8, s.max_num_seqs), 64);
    s.enable_prefix_caching = uni(0, 1) == 1;
    s.policy = uni(0, 1) ? SchedulingPolicy::PRIORITY : SchedulingPolicy::FCFS;
    s.watermark = uni(0, 2) == 0 ? 0.1 : 0.0;
    s.scheduler_reserve_full_isl = uni(0, 3) != 0;
    s.long_prefill_token_threshold = uni(0, 2) == 0 ? uni(1, 16) : 0;
    s.num_lookahead_tokens = uni(0, 4) == 0 ? uni(1, 3) : 0;
    s.preemption_mode = PreemptionMode::SWAP;
    s.num_host_swap_slots = uni(0, 3) == 0 ? uni(0, 4) : uni(5, 200);
    c.check_invariants = true;
    c.livelock_steps = 1000;
    c.swap_bytes_per_block = 1000;
    const Trace t = test::random_trace(rng, test::DrawOrder::kInputFirst);
    SwapCheckingBackend b(s.num_gpu_blocks, s.block_size, s.num_host_swap_slots,
                          !s.enable_prefix_caching);
    const ReplayResult r = run_replay(c, t, b, step);
    ASSERT_EQ(r.summary.finished + r.summary.rejected, r.summary.requests) << "seed " << seed;
    EXPECT_EQ(b.bad_reads, 0) << "seed " << seed;
    EXPECT_EQ(r.summary.swap_outs + r.summary.swap_fallbacks,
              r.summary.preemptions -
                  (r.summary.rejected_by_reason[static_cast<size_t>(RejectReason::OUTGREW_POOL)]))
        << "seed " << seed;
    EXPECT_LE(r.summary.peak_host_slots_used, s.num_host_swap_slots) << "seed " << seed;
    EXPECT_EQ(b.swapped_out_blocks, r.summary.swap_out_blocks) << "seed " << seed;
    for (const RequestRecord& rec : r.requests) {
      // A request that was only ever swapped (never recomputed) recomputes nothing.
      if (rec.finished && rec.swap_outs == rec.preemptions) {
        EXPECT_EQ(rec.recomputed_tokens, 0) << "seed " << seed << " request " << rec.request_id;
      }
    }
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace kvsim
