// SchedulerConfig::defer_private_block_hashes is a speed option that must change nothing: salted
// (request-private) block hashes stay out of BlockPool's prefix map until their request is
// preempted. These tests replay random traces - shared token prefixes, content-free prompts,
// small pools that preempt, sync and async, FCFS and priority - with the option on and off, and
// require the same bytes everywhere: every step's slot mapping and block tables (a recording
// backend), the timeline and request CSVs, and the JSON summary (evictions, prefix-cache
// counters). BlockPool's invariants, private blocks included, are checked after every step.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include <fmt/core.h>

#include "kvsim/core/block_pool.h"
#include "kvsim/core/kv_backend.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "random_trace.h"
#include "replay_texts.h"

namespace kvsim {
namespace {

// Digests every batch the engine hands over: block ids are what a GPU would see.
class RecordingBackend final : public KvBackend {
 public:
  const char* name() const override { return "recording"; }
  StepExecution execute(const StepBatch& b) override {
    for (int64_t s : b.slot_mapping) log += fmt::format("{},", s);
    log += '|';
    for (BlockId id : b.block_tables) log += fmt::format("{},", id);
    log += '|';
    for (int32_t o : b.block_table_offsets) log += fmt::format("{},", o);
    log += '\n';
    return {};
  }
  std::string log;
};

struct HashOutputs {
  int64_t preemptions = 0;
  std::string batches;
  std::string timeline;
  std::string requests;
  std::string summary;
};

HashOutputs replay_hashes(const Trace& trace, ReplayConfig config, bool defer) {
  config.scheduler.defer_private_block_hashes = defer;
  RecordingBackend backend;
  FixedStepTime step(10.0);
  const ReplayResult r = run_replay(config, trace, backend, step);
  HashOutputs out;
  out.preemptions = r.summary.preemptions;
  out.batches = std::move(backend.log);
  const test::ReplayTexts texts = test::replay_texts(r);
  out.timeline = texts.timeline;
  out.requests = texts.requests;
  out.summary = texts.summary;
  return out;
}

TEST(PrivateBlockHashes, RandomReplaysAreIdenticalWithAndWithoutDeferral) {
  std::mt19937_64 rng(20261201);
  int64_t preempting_cases = 0;
  for (int seed = 0; seed < 160; ++seed) {
    const Trace trace = test::random_trace(rng, test::DrawOrder::kInputFirst);
    ReplayConfig c;
    std::uniform_int_distribution<int> pick(0, 3);
    c.scheduler.block_size = 4;
    c.scheduler.max_model_len = 128;
    // Pools from barely one request to roomy: the small ones preempt and re-admit, which is
    // when private blocks are published and looked up again.
    c.scheduler.num_gpu_blocks = 33 + 12 * pick(rng);
    c.scheduler.max_num_batched_tokens = 32 + 32 * pick(rng);
    c.scheduler.max_num_seqs = 4 + 4 * pick(rng);
    c.scheduler.enable_prefix_caching = true;
    c.scheduler.async_scheduling = seed % 2 == 0;
    c.scheduler.policy = seed % 3 == 0 ? SchedulingPolicy::PRIORITY : SchedulingPolicy::FCFS;
    c.check_invariants = true;
    const HashOutputs eager = replay_hashes(trace, c, false);
    const HashOutputs deferred = replay_hashes(trace, c, true);
    const std::string what = fmt::format("seed {}", seed);
    EXPECT_EQ(eager.batches, deferred.batches) << what;
    EXPECT_EQ(eager.timeline, deferred.timeline) << what;
    EXPECT_EQ(eager.requests, deferred.requests) << what;
    EXPECT_EQ(eager.summary, deferred.summary) << what;
    if (eager.preemptions > 0) ++preempting_cases;
  }
  // The property is only interesting where requests are preempted and resumed.
  EXPECT_GE(preempting_cases, 20);
}

TEST(PrivateBlockHashes, BlockPoolPrivateBlocksCountAsCachedButAreNotFound) {
  BlockPool pool(8, /*enable_caching=*/true);
  std::vector<BlockId> got;
  pool.get_new_blocks(3, got);  // 1, 2, 3
  const BlockHash h1{11, 1};
  const BlockHash h2{22, 2};
  const BlockHash h3{33, 3};
  const std::vector<BlockHash> hs{h1, h2};
  pool.cache_full_blocks(std::span(got.data(), 1), std::span(hs.data(), 1));
  const std::vector<BlockHash> private_hs{h2, h3};
  pool.cache_private_blocks(std::span(got.data() + 1, 2), private_hs);
  pool.check_invariants();
  EXPECT_EQ(pool.num_cached_blocks(), 3);
  EXPECT_TRUE(pool.is_cached(got[1]));
  EXPECT_TRUE(pool.is_private(got[1]));
  EXPECT_EQ(pool.block_hash(got[2]), h3);
  EXPECT_EQ(pool.get_cached_block(h1), got[0]);
  EXPECT_FALSE(pool.get_cached_block(h2).has_value());
  // Freed, private blocks go to the tail like any hashed block (LRU eviction order).
  pool.free_blocks(std::vector<BlockId>{got[2], got[1], got[0]});
  pool.check_invariants();
  const std::vector<BlockId> order = pool.free_block_queue().get_all_free_blocks();
  ASSERT_GE(order.size(), 3u);
  EXPECT_EQ(std::vector<BlockId>(order.end() - 3, order.end()),
            (std::vector<BlockId>{got[2], got[1], got[0]}));
  // Publishing enters them in the map in the given order; re-publishing changes nothing.
  pool.publish_private_blocks(std::vector<BlockId>{got[1], got[2], got[0]});
  pool.publish_private_blocks(std::vector<BlockId>{got[1]});
  pool.check_invariants();
  EXPECT_FALSE(pool.is_private(got[1]));
  EXPECT_EQ(pool.get_cached_block(h2), got[1]);
  EXPECT_EQ(pool.get_cached_block(h3), got[2]);
  EXPECT_EQ(pool.num_cached_blocks(), 3);
  // Evicting a private block on reuse counts as an eviction, as for a mapped one.
  BlockPool pool2(4, true);
  std::vector<BlockId> b;
  pool2.get_new_blocks(3, b);
  pool2.cache_private_blocks(std::span(b.data(), 1), std::span(&h1, 1));
  pool2.free_blocks(b);
  std::vector<BlockId> again;
  pool2.get_new_blocks(3, again);
  EXPECT_EQ(pool2.num_evictions(), 1);
  EXPECT_EQ(pool2.num_cached_blocks(), 0);
  EXPECT_FALSE(pool2.is_cached(b[0]));
  pool2.check_invariants();
}

}  // namespace
}  // namespace kvsim
