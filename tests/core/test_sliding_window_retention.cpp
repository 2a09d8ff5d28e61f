// Sliding-window prefix-cache retention (issue 26; vLLM 0.33 --prefix-cache-retention-interval,
// KVCacheManagerConfig::prefix_cache_retention_interval): which window blocks cache_blocks()
// hashes, the shared-prefix junction get_computed_blocks() reports, the free-queue order of the
// blocks left unhashed, and the validation of the interval.
//
// The transcripts below were produced by vLLM 0.33.0's own KVCacheManager (full attention +
// sliding window 64 and a single sliding-window group, block size 16, 60/40 blocks,
// max_in_flight_tokens 64, sha256 hashes) on the same calls, with the interval None (-1), 0
// and 128: every hit, junction, block table, hashed window block and free-queue head matches.
// The mask example is the one of vLLM's SlidingWindowManager.reachable_block_mask run on
// bs = 16, W = 128, a 1000-token prompt.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvsim/core/kv_cache_manager.h"
#include "kvsim/core/kv_cache_spec.h"
#include "kvsim/core/param.h"
#include "kvsim/core/single_type_kv_cache_manager.h"

#include "kv_cache_spec_fixture.h"

namespace kvsim {
namespace {

using core_test::kBs;
using core_test::spec;

KVCacheManagerConfig window_config(const std::vector<KVCacheSpec>& specs, int32_t num_blocks,
                                   int32_t retention_interval) {
  KVCacheManagerConfig c;
  c.num_gpu_blocks = num_blocks;
  c.block_size = kBs;
  c.max_model_len = 1000;
  c.max_in_flight_tokens = 64;
  c.prefix_cache_retention_interval = retention_interval;
  c.kv_cache_config.num_blocks = num_blocks;
  for (size_t g = 0; g < specs.size(); ++g) {
    c.kv_cache_config.kv_cache_groups.push_back({{static_cast<int32_t>(g)}, specs[g]});
  }
  return c;
}

std::vector<int32_t> window_range(int32_t first, int32_t count) {
  std::vector<int32_t> v(static_cast<size_t>(count));
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::unique_ptr<Request> window_request(int64_t id, std::vector<int32_t> tokens) {
  auto r = std::make_unique<Request>();
  r->request_id = id;
  r->num_prompt_tokens = static_cast<int32_t>(tokens.size());
  r->max_tokens = 100;
  r->content.token_ids = std::make_shared<const std::vector<int32_t>>(std::move(tokens));
  r->enable_block_hashing(kBs);
  return r;
}

std::string list(std::span<const BlockId> ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

// Drives a KVCacheManager the way the scheduler does (the junction stored at the lookup) and
// prints what the vLLM script printed, line for line.
class Transcript {
 public:
  explicit Transcript(const KVCacheManagerConfig& c) : m_(c) {}

  Request& admit(int64_t id, std::vector<int32_t> tokens) {
    live_.push_back(window_request(id, std::move(tokens)));
    Request& r = *live_.back();
    const ComputedBlocks hits = m_.get_computed_blocks(r);
    r.shared_prefix_boundary = hits.shared_prefix_boundary;
    AllocateSlotsArgs a;
    a.num_new_tokens = r.num_tokens() - hits.num_computed_tokens;
    a.num_new_computed_tokens = hits.num_computed_tokens;
    a.new_computed_group_blocks = hits.group_blocks;
    EXPECT_TRUE(m_.allocate_slots(r, a).has_value());
    r.num_computed_tokens = r.num_tokens();
    out_ += "admit " + std::to_string(id) + ": hit " + std::to_string(hits.num_computed_tokens) +
            " spb " + std::to_string(hits.shared_prefix_boundary) + " tables " + tables(r) + "\n";
    check();
    return r;
  }
  void decode(Request& r) {
    r.append_output_tokens(1);
    EXPECT_TRUE(m_.allocate_slots(r, {.num_new_tokens = 1}).has_value());
    r.num_computed_tokens += 1;
    out_ += "decode " + std::to_string(r.request_id) + ": tables " + tables(r) + "\n";
    check();
  }
  // The window group's blocks that are hashed.
  void hashed(const Request& r, size_t window_group) {
    std::vector<BlockId> idx;
    const auto t = m_.coordinator()->manager(window_group).get_blocks(r.request_id);
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] != kNullBlockId && m_.block_pool().is_cached(t[i])) {
        idx.push_back(static_cast<BlockId>(i));
      }
    }
    out_ += "  swa hashed " + std::to_string(r.request_id) + ": " + list(idx) + "\n";
  }
  void free(const Request& r) {
    m_.free(r);
    const auto q = m_.block_pool().free_block_queue().get_all_free_blocks();
    out_ += "free " + std::to_string(r.request_id) + ": queue head " +
            list(std::span(q).first(std::min<size_t>(12, q.size()))) + "\n";
    check();
  }
  const std::string& text() const { return out_; }

 private:
  std::string tables(const Request& r) const {
    std::string s = "[";
    for (size_t g = 0; g < m_.num_kv_cache_groups(); ++g) {
      s += (g ? ", " : "") + list(m_.coordinator()->manager(g).get_blocks(r.request_id));
    }
    return s + "]";
  }
  void check() { EXPECT_NO_THROW(m_.check_invariants()); }

  KVCacheManager m_;
  std::vector<std::unique_ptr<Request>> live_;
  std::string out_;
};

// Full attention + sliding window 64 (need = 4 blocks), 60 blocks: a 200-token prompt, a resend,
// a longer prompt sharing 160 tokens (the junction), a sibling of that one, a 400-token prompt.
std::string hybrid_transcript(int32_t retention_interval) {
  Transcript t(window_config(
      {spec(KVCacheSpecKind::kFullAttention), spec(KVCacheSpecKind::kSlidingWindow, 64)}, 60,
      retention_interval));
  const std::vector<int32_t> a_tokens = window_range(0, 200);
  const std::vector<int32_t> shared(a_tokens.begin(), a_tokens.begin() + 160);
  Request& a = t.admit(0, a_tokens);
  t.hashed(a, 1);
  t.decode(a);
  t.decode(a);
  t.free(a);
  t.free(t.admit(1, a_tokens));
  Request& c = t.admit(2, concat(shared, window_range(5000, 100)));
  t.hashed(c, 1);
  Request& d = t.admit(3, concat(shared, window_range(7000, 50)));
  t.hashed(d, 1);
  t.free(c);
  t.free(d);
  Request& e = t.admit(4, window_range(20000, 400));
  t.hashed(e, 1);
  t.free(e);
  return t.text();
}

// One sliding-window group (vLLM's UnitaryKVCacheCoordinator: never a junction), 40 blocks.
std::string unitary_transcript(int32_t retention_interval) {
  Transcript t(window_config({spec(KVCacheSpecKind::kSlidingWindow, 64)}, 40, retention_interval));
  const std::vector<int32_t> a_tokens = window_range(0, 200);
  const std::vector<int32_t> shared(a_tokens.begin(), a_tokens.begin() + 160);
  Request& a = t.admit(10, a_tokens);
  t.hashed(a, 0);
  t.decode(a);
  t.free(a);
  t.free(t.admit(11, a_tokens));
  Request& c = t.admit(12, concat(shared, window_range(5000, 100)));
  t.hashed(c, 0);
  t.free(c);
  return t.text();
}

TEST(SlidingWindowRetention, MaskOfTheReportExample) {
  // bs 16, W 128 (need = cdiv(127, 16) = 8), prompt 1000: replay boundary 999, floor = 62.
  BlockPool pool(100, true);
  auto kept = [&](int32_t interval) {
    const auto m = make_single_type_kv_cache_manager(spec(KVCacheSpecKind::kSlidingWindow, 128),
                                                     pool, true, 0, 64, 2000, interval);
    std::vector<BlockId> v;
    for (int64_t j = 0; j < 64; ++j) {
      if (m->retains_block(j, 1000, 0)) v.push_back(static_cast<BlockId>(j));
    }
    return v;
  };
  EXPECT_EQ(kept(0), window_range(54, 8));
  std::vector<BlockId> r256 =
      concat(concat(window_range(8, 8), window_range(24, 8)), window_range(40, 8));
  r256 = concat(r256, window_range(54, 10));  // 54..61 (replay boundary) and 56..63 (segment tail)
  EXPECT_EQ(kept(256), r256);
  EXPECT_EQ(kept(-1), window_range(0, 64));
  // need 8 >= 128 / 16: every block is reachable, vLLM's mask is None.
  EXPECT_EQ(kept(128), window_range(0, 64));
  // A junction at 500 adds the tail ending at block 31.
  const auto m0 = make_single_type_kv_cache_manager(spec(KVCacheSpecKind::kSlidingWindow, 128),
                                                    pool, true, 0, 64, 2000, 0);
  EXPECT_TRUE(m0->sparse_retention());
  EXPECT_TRUE(m0->retains_block(23, 1000, 500));
  EXPECT_TRUE(m0->retains_block(30, 1000, 500));
  EXPECT_FALSE(m0->retains_block(31, 1000, 500));
  EXPECT_FALSE(m0->retains_block(22, 1000, 500));
  EXPECT_FALSE(m0->retains_block(30, 1000, 0));
  // Full attention and chunked-local groups stay dense whatever the interval.
  for (auto kind : {KVCacheSpecKind::kFullAttention, KVCacheSpecKind::kChunkedLocalAttention}) {
    const auto m = make_single_type_kv_cache_manager(spec(kind, 64), pool, true, 0, 64, 2000, 0);
    EXPECT_FALSE(m->sparse_retention());
    EXPECT_TRUE(m->retains_block(3, 1000, 0));
  }
}

TEST(SlidingWindowRetention, HybridDenseMatchesVllm) {
  EXPECT_EQ(
      hybrid_transcript(-1),
      "admit 0: hit 0 spb 0 tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], [14, 15, "
      "16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26]]\n"
      "  swa hashed 0: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]\n"
      "decode 0: tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], [0, 0, 0, 0, 0, 0, 0, "
      "0, 22, 23, 24, 25, 26]]\n"
      "decode 0: tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], [0, 0, 0, 0, 0, 0, 0, "
      "0, 22, 23, 24, 25, 26]]\n"
      "free 0: queue head [26, 13, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36]\n"
      "admit 1: hit 192 spb 0 tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 26], [0, 0, 0, "
      "0, 0, 0, 0, 0, 22, 23, 24, 25, 13]]\n"
      "free 1: queue head [13, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36]\n"
      "admit 2: hit 160 spb 0 tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 26, 27, 28, 29, "
      "30, 31], [0, 0, 0, 0, 0, 0, 20, 21, 22, 23, 32, 33, 34, 35, 36, 37, 38]]\n"
      "  swa hashed 2: [6, 7, 8, 9, 10, 11, 12, 13, 14, 15]\n"
      "admit 3: hit 160 spb 0 tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 39, 40, 41, 42], [0, "
      "0, 0, 0, 0, 0, 20, 21, 22, 23, 43, 44, 45, 46]]\n"
      "  swa hashed 3: [6, 7, 8, 9, 10, 11, 12]\n"
      "free 2: queue head [38, 31, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56]\n"
      "free 3: queue head [46, 42, 38, 31, 47, 48, 49, 50, 51, 52, 53, 54]\n"
      "admit 4: hit 0 spb 0 tables [[46, 42, 38, 31, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, "
      "57, 58, 59, 19, 18, 17, 16, 15, 14, 12, 11], [25, 24, 30, 29, 28, 27, 26, 13, 37, 36, "
      "35, 34, 33, 32, 41, 40, 39, 10, 9, 8, 7, 6, 5, 4, 3]]\n"
      "  swa hashed 4: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, "
      "20, 21, 22, 23, 24]\n"
      "free 4: queue head [2, 1, 45, 44, 43, 23, 22, 21, 20, 11, 12, 14]\n");
}

// R = 0: only the window tails before the replay boundary (prompt - 1) and the junction are
// hashed. The resend still hits 192 tokens; the longer prompt sharing 160 tokens hits nothing
// (its window hit needs blocks 6..9, dropped) and pins the junction 160, so its sibling then
// hits 160. Unhashed window blocks go to the front of the free queue as they are freed.
TEST(SlidingWindowRetention, HybridSparseMatchesVllm) {
  EXPECT_EQ(
      hybrid_transcript(0),
      "admit 0: hit 0 spb 0 tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], [14, 15, "
      "16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26]]\n"
      "  swa hashed 0: [8, 9, 10, 11]\n"
      "decode 0: tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], [0, 0, 0, 0, 0, 0, 0, "
      "0, 22, 23, 24, 25, 26]]\n"
      "decode 0: tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], [0, 0, 0, 0, 0, 0, 0, "
      "0, 22, 23, 24, 25, 26]]\n"
      "free 0: queue head [26, 13, 21, 20, 19, 18, 17, 16, 15, 14, 27, 28]\n"
      "admit 1: hit 192 spb 0 tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 26], [0, 0, 0, "
      "0, 0, 0, 0, 0, 22, 23, 24, 25, 13]]\n"
      "free 1: queue head [13, 26, 21, 20, 19, 18, 17, 16, 15, 14, 27, 28]\n"
      "admit 2: hit 0 spb 160 tables [[13, 26, 21, 20, 19, 18, 17, 16, 15, 14, 27, 28, 29, "
      "30, 31, 32, 33], [34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, "
      "50]]\n"
      "  swa hashed 2: [6, 7, 8, 9, 12, 13, 14, 15]\n"
      "admit 3: hit 160 spb 0 tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 51, 52, 53, 54], [0, 0, "
      "0, 0, 0, 0, 40, 41, 22, 23, 55, 56, 57, 58]]\n"
      "  swa hashed 3: [6, 7, 8, 9, 10, 11, 12]\n"
      "free 2: queue head [50, 45, 44, 39, 38, 37, 36, 35, 34, 33, 59, 12]\n"
      "free 3: queue head [58, 54, 50, 45, 44, 39, 38, 37, 36, 35, 34, 33]\n"
      "admit 4: hit 0 spb 0 tables [[58, 54, 50, 45, 44, 39, 38, 37, 36, 35, 34, 33, 59, 12, "
      "11, 25, 24, 32, 31, 30, 29, 28, 27, 14, 15], [16, 17, 18, 19, 20, 21, 26, 13, 49, 48, "
      "47, 46, 43, 42, 53, 52, 51, 10, 9, 8, 7, 6, 5, 4, 3]]\n"
      "  swa hashed 4: [20, 21, 22, 23]\n"
      "free 4: queue head [3, 8, 9, 10, 51, 52, 53, 42, 43, 46, 47, 48]\n");
}

// R = 128 (per = 8 blocks > need 4): also blocks 4..7, 12..15, 20..23 of each request.
TEST(SlidingWindowRetention, HybridIntervalMatchesVllm) {
  EXPECT_EQ(
      hybrid_transcript(128),
      "admit 0: hit 0 spb 0 tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], [14, 15, "
      "16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26]]\n"
      "  swa hashed 0: [4, 5, 6, 7, 8, 9, 10, 11]\n"
      "decode 0: tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], [0, 0, 0, 0, 0, 0, 0, "
      "0, 22, 23, 24, 25, 26]]\n"
      "decode 0: tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], [0, 0, 0, 0, 0, 0, 0, "
      "0, 22, 23, 24, 25, 26]]\n"
      "free 0: queue head [26, 13, 17, 16, 15, 14, 27, 28, 29, 30, 31, 32]\n"
      "admit 1: hit 192 spb 0 tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 26], [0, 0, 0, "
      "0, 0, 0, 0, 0, 22, 23, 24, 25, 13]]\n"
      "free 1: queue head [13, 26, 17, 16, 15, 14, 27, 28, 29, 30, 31, 32]\n"
      "admit 2: hit 160 spb 0 tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 26, 17, 16, 15, "
      "14, 27], [0, 0, 0, 0, 0, 0, 20, 21, 22, 23, 28, 29, 30, 31, 32, 33, 34]]\n"
      "  swa hashed 2: [6, 7, 8, 9, 12, 13, 14, 15]\n"
      "admit 3: hit 160 spb 0 tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 35, 36, 37, 38], [0, 0, "
      "0, 0, 0, 0, 20, 21, 22, 23, 39, 40, 41, 42]]\n"
      "  swa hashed 3: [6, 7, 8, 9, 10, 11, 12]\n"
      "free 2: queue head [34, 29, 28, 27, 43, 44, 45, 46, 47, 48, 49, 50]\n"
      "free 3: queue head [42, 38, 34, 29, 28, 27, 43, 44, 45, 46, 47, 48]\n"
      "admit 4: hit 0 spb 0 tables [[42, 38, 34, 29, 28, 27, 43, 44, 45, 46, 47, 48, 49, 50, "
      "51, 52, 53, 54, 55, 56, 57, 58, 59, 19, 18], [12, 11, 25, 24, 14, 15, 16, 17, 26, 13, "
      "33, 32, 31, 30, 37, 36, 35, 10, 9, 8, 7, 6, 5, 4, 3]]\n"
      "  swa hashed 4: [4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23]\n"
      "free 4: queue head [3, 8, 9, 10, 35, 32, 33, 13, 26, 24, 25, 11]\n");
}

TEST(SlidingWindowRetention, SingleWindowGroupMatchesVllm) {
  EXPECT_EQ(unitary_transcript(-1),
            "admit 10: hit 0 spb 0 tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]]\n"
            "  swa hashed 10: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]\n"
            "decode 10: tables [[0, 0, 0, 0, 0, 0, 0, 0, 9, 10, 11, 12, 13]]\n"
            "free 10: queue head [13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24]\n"
            "admit 11: hit 192 spb 0 tables [[0, 0, 0, 0, 0, 0, 0, 0, 9, 10, 11, 12, 13]]\n"
            "free 11: queue head [13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24]\n"
            "admit 12: hit 160 spb 0 tables [[0, 0, 0, 0, 0, 0, 7, 8, 9, 10, 13, 14, 15, 16, 17, "
            "18, 19]]\n"
            "  swa hashed 12: [6, 7, 8, 9, 10, 11, 12, 13, 14, 15]\n"
            "free 12: queue head [19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30]\n");
  // Sparse: the resend still hits 192; the longer prompt hits nothing and, with no other group
  // to lag, pins no junction.
  EXPECT_EQ(unitary_transcript(0),
            "admit 10: hit 0 spb 0 tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]]\n"
            "  swa hashed 10: [8, 9, 10, 11]\n"
            "decode 10: tables [[0, 0, 0, 0, 0, 0, 0, 0, 9, 10, 11, 12, 13]]\n"
            "free 10: queue head [13, 8, 7, 6, 5, 4, 3, 2, 1, 14, 15, 16]\n"
            "admit 11: hit 192 spb 0 tables [[0, 0, 0, 0, 0, 0, 0, 0, 9, 10, 11, 12, 13]]\n"
            "free 11: queue head [13, 8, 7, 6, 5, 4, 3, 2, 1, 14, 15, 16]\n"
            "admit 12: hit 0 spb 0 tables [[13, 8, 7, 6, 5, 4, 3, 2, 1, 14, 15, 16, 17, 18, 19, "
            "20, 21]]\n"
            "  swa hashed 12: [12, 13, 14, 15]\n"
            "free 12: queue head [21, 16, 15, 14, 1, 2, 3, 4, 5, 6, 7, 8]\n");
  EXPECT_EQ(unitary_transcript(128),
            "admit 10: hit 0 spb 0 tables [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]]\n"
            "  swa hashed 10: [4, 5, 6, 7, 8, 9, 10, 11]\n"
            "decode 10: tables [[0, 0, 0, 0, 0, 0, 0, 0, 9, 10, 11, 12, 13]]\n"
            "free 10: queue head [13, 4, 3, 2, 1, 14, 15, 16, 17, 18, 19, 20]\n"
            "admit 11: hit 192 spb 0 tables [[0, 0, 0, 0, 0, 0, 0, 0, 9, 10, 11, 12, 13]]\n"
            "free 11: queue head [13, 4, 3, 2, 1, 14, 15, 16, 17, 18, 19, 20]\n"
            "admit 12: hit 160 spb 0 tables [[0, 0, 0, 0, 0, 0, 7, 8, 9, 10, 13, 4, 3, 2, 1, 14, "
            "15]]\n"
            "  swa hashed 12: [6, 7, 8, 9, 12, 13, 14, 15]\n"
            "free 12: queue head [15, 4, 13, 16, 17, 18, 19, 20, 21, 22, 23, 24]\n");
}

// The coordinator's num_uncached: the longest group lookup minus the reconciled hit.
TEST(SlidingWindowRetention, CoordinatorReportsTheUncachedSharedPrefix) {
  KVCacheManager m(window_config(
      {spec(KVCacheSpecKind::kFullAttention), spec(KVCacheSpecKind::kSlidingWindow, 64)}, 60, 0));
  auto a = window_request(0, window_range(0, 200));
  const ComputedBlocks none = m.get_computed_blocks(*a);
  EXPECT_EQ(none.num_computed_tokens, 0);
  EXPECT_EQ(none.shared_prefix_boundary, 0);
  AllocateSlotsArgs args;
  args.num_new_tokens = 200;
  ASSERT_TRUE(m.allocate_slots(*a, args).has_value());
  auto c = window_request(1, concat(window_range(0, 160), window_range(5000, 100)));
  std::vector<std::vector<BlockId>> out;
  int64_t uncached = -1;
  EXPECT_EQ(
      m.coordinator()->find_longest_cache_hit(c->block_hashes, c->num_tokens() - 1, out, &uncached),
      0);
  EXPECT_EQ(uncached, 160);
  EXPECT_EQ(m.get_computed_blocks(*c).shared_prefix_boundary, 160);
  // A resend: every group hits 192, nothing uncached.
  auto b = window_request(2, window_range(0, 200));
  const ComputedBlocks resend = m.get_computed_blocks(*b);
  EXPECT_EQ(resend.num_computed_tokens, 192);
  EXPECT_EQ(resend.shared_prefix_boundary, 0);
  m.check_invariants();
}

std::string spelled_error(const KVCacheManagerConfig& c) {
  try {
    KVCacheManager m(c);
  } catch (const std::invalid_argument& e) {
    return spell_params(e.what(), ParamSpelling::kNeutral);
  }
  return "";
}

TEST(SlidingWindowRetention, ValidatesTheInterval) {
  const std::vector<KVCacheSpec> full{spec(KVCacheSpecKind::kFullAttention)};
  const std::vector<KVCacheSpec> window{spec(KVCacheSpecKind::kFullAttention),
                                        spec(KVCacheSpecKind::kSlidingWindow, 64)};
  const std::vector<KVCacheSpec> chunked{spec(KVCacheSpecKind::kChunkedLocalAttention, 64),
                                         spec(KVCacheSpecKind::kFullAttention)};
  // None is always valid; 0 too; without a window group a positive interval is refused.
  for (const auto& s : {full, window, chunked}) {
    EXPECT_EQ(spelled_error(window_config(s, 30, -1)), "");
    EXPECT_EQ(spelled_error(window_config(s, 30, 0)), "");
  }
  KVCacheManagerConfig plain;  // empty kv_cache_config: one full-attention group
  plain.num_gpu_blocks = 30;
  plain.max_model_len = 1000;
  plain.prefix_cache_retention_interval = 0;
  EXPECT_EQ(spelled_error(plain), "");
  plain.prefix_cache_retention_interval = 32;
  EXPECT_EQ(spelled_error(plain),
            "prefix_cache_retention_interval is 32 but this model has no sliding-window KV cache "
            "group, so retention has no effect; set it to 0 (or None: dense)");
  EXPECT_NE(spelled_error(window_config(full, 30, 16)).find("no sliding-window"),
            std::string::npos);
  EXPECT_NE(spelled_error(window_config(chunked, 30, 64)).find("no sliding-window"),
            std::string::npos);
  // With a window group: a multiple of the block size.
  EXPECT_EQ(spelled_error(window_config(window, 30, 32)), "");
  EXPECT_EQ(spelled_error(window_config(window, 30, 24)),
            "prefix_cache_retention_interval (24) must be None, 0 or a positive multiple of the "
            "block size (16)");
  EXPECT_NE(spelled_error(window_config(window, 30, -2)).find("(-2) must be"), std::string::npos);
  EXPECT_NE(spelled_error(window_config({spec(KVCacheSpecKind::kSlidingWindow, 64)}, 30, 8))
                .find("(8) must be"),
            std::string::npos);
  // The coordinator validates on its own as well.
  BlockPool pool(30, true);
  EXPECT_THROW(
      KVCacheCoordinator(window_config(window, 30, 20).kv_cache_config, pool, true, 1000, 64, 20),
      std::invalid_argument);
}

}  // namespace
}  // namespace kvsim
