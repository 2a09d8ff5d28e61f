// The KV backends on vLLM 0.26's hybrid layout: KV cache tensors shared by one layer of every
// group, per-group slot mappings and block tables, window groups whose dropped blocks are the null
// block. Checked against an independent scalar model of the pool (which group wrote which slot
// last), on the host twin always and on the device when one is present.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kv_test_util.h"
#include "kvsim/core/block_pool.h"
#include "kvsim/core/model_presets.h"
#include "kvsim/core/planner.h"
#include "kvsim/cuda/backend_factory.h"
#include "kvsim/cuda/kv_backends.h"
#include "kvsim/cuda/kv_ledger.h"

namespace kvsim {
namespace {

// Group g of the test layout: its layer count and sliding window (0 = full attention).
struct TestGroup {
  int32_t num_layers = 0;
  int32_t window = 0;
};

// A small scheduler over one shared BlockPool: every request holds one table per group; a window
// group replaces blocks that fell entirely out of its window by the null block and frees them,
// as vLLM's SlidingWindowManager does. Records, per slot, the last (request, position, group) that
// wrote it: the scalar model the backends are checked against.
class HybridBatchGenerator {
 public:
  HybridBatchGenerator(int32_t num_blocks, int32_t block_size, std::vector<TestGroup> groups,
                       uint64_t seed)
      : pool_(num_blocks, /*enable_caching=*/false),
        bs_(block_size),
        groups_(std::move(groups)),
        rng_(seed),
        slot_request_(static_cast<size_t>(num_blocks) * block_size, -1),
        slot_position_(slot_request_.size(), 0),
        slot_group_(slot_request_.size(), 0) {}

  StepBatch next() {
    StepBatch b;
    b.step_index = step_++;
    b.block_size = bs_;
    b.groups.resize(groups_.size());
    for (GroupStepTables& t : b.groups) t.block_table_offsets.push_back(0);
    if (reqs_.size() < 12 && coin(0.5)) {
      Req r;
      r.id = next_id_++;
      r.prompt = 1 + static_cast<int32_t>(pick(static_cast<size_t>(6 * bs_)));
      r.output = 1 + static_cast<int32_t>(pick(static_cast<size_t>(4 * bs_)));
      r.tables.resize(groups_.size());
      reqs_.push_back(r);
    }
    for (Req& r : reqs_) {
      // Drop what fell out of each window group's window (tokens before computed - window).
      for (size_t g = 0; g < groups_.size(); ++g) {
        if (groups_[g].window == 0) continue;
        const int32_t first_needed = std::max(0, r.computed - groups_[g].window + 1);
        std::vector<BlockId> freed;
        for (int32_t i = 0; i < first_needed / bs_; ++i) {
          BlockId& blk = r.tables[g][static_cast<size_t>(i)];
          if (blk == kNullBlockId) continue;
          freed.push_back(blk);
          blk = kNullBlockId;
        }
        if (!freed.empty()) pool_.free_blocks(freed);
      }
      const int32_t total = r.prompt + r.output;
      int32_t n = r.computed < r.prompt ? std::min(r.prompt - r.computed, 2 * bs_) : 1;
      n = std::min(n, total - r.computed);
      const auto covered = static_cast<size_t>(cdiv(r.computed + n, bs_));
      int32_t need = 0;
      for (const auto& t : r.tables) need += static_cast<int32_t>(covered - t.size());
      if (need > pool_.get_num_free_blocks()) continue;
      for (auto& t : r.tables) {
        if (covered > t.size()) pool_.get_new_blocks(static_cast<int32_t>(covered - t.size()), t);
      }
      b.writes.push_back({r.id, r.computed, n});
      b.reads.push_back({r.id, r.computed + n});
      for (size_t g = 0; g < groups_.size(); ++g) {
        GroupStepTables& t = b.groups[g];
        for (int32_t i = 0; i < n; ++i) {
          const int32_t p = r.computed + i;
          const int64_t slot = int64_t{r.tables[g][static_cast<size_t>(p / bs_)]} * bs_ + p % bs_;
          t.slot_mapping.push_back(slot);
          slot_request_[static_cast<size_t>(slot)] = r.id;
          slot_position_[static_cast<size_t>(slot)] = p;
          slot_group_[static_cast<size_t>(slot)] = static_cast<int32_t>(g);
        }
        t.block_tables.insert(t.block_tables.end(), r.tables[g].begin(), r.tables[g].end());
        t.block_table_offsets.push_back(static_cast<int32_t>(t.block_tables.size()));
      }
      r.computed += n;
    }
    for (auto it = reqs_.begin(); it != reqs_.end();) {
      if (it->computed == it->prompt + it->output) {
        for (const auto& t : it->tables) {
          std::vector<BlockId> held;
          for (auto blk = t.rbegin(); blk != t.rend(); ++blk) {
            if (*blk != kNullBlockId) held.push_back(*blk);
          }
          pool_.free_blocks(held);
        }
        it = reqs_.erase(it);
      } else {
        ++it;
      }
    }
    return b;
  }

  const std::vector<int64_t>& slot_request() const { return slot_request_; }
  const std::vector<int32_t>& slot_position() const { return slot_position_; }
  const std::vector<int32_t>& slot_group() const { return slot_group_; }

 private:
  struct Req {
    int64_t id = 0;
    int32_t prompt = 0, output = 0, computed = 0;
    std::vector<std::vector<BlockId>> tables;  // per group
  };
  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  BlockPool pool_;
  int32_t bs_;
  std::vector<TestGroup> groups_;
  std::mt19937_64 rng_;
  std::vector<Req> reqs_;
  int64_t next_id_ = 0;
  int64_t step_ = 0;
  std::vector<int64_t> slot_request_;
  std::vector<int32_t> slot_position_;
  std::vector<int32_t> slot_group_;
};

// 3 tensors: group 0 full attention over 3 layers, group 1 a 2-layer sliding window of 20 tokens
// (fewer layers than tensors: vLLM's padding slot of the last group).
constexpr int32_t kBlocks = 96;
const std::vector<TestGroup> kGroups = {{3, 0}, {2, 20}};

KvCacheLayout hybrid_layout() {
  KvCacheLayout l;
  l.num_blocks = kBlocks;
  l.block_size = 8;
  l.num_layers = 3;  // KV cache tensors, shared across groups
  l.num_kv_heads = 2;
  l.head_dim = 16;
  l.dtype = KvDtype::kBf16;
  return l;
}

std::vector<int32_t> group_layers() {
  std::vector<int32_t> n;
  for (const TestGroup& g : kGroups) n.push_back(g.num_layers);
  return n;
}

// Scalar checksum of read r of batch b: every group's non-null table entries, its n_g tensors.
uint64_t ref_hybrid_checksum(const KvCacheLayout& l, const unsigned char* pool, const StepBatch& b,
                             size_t r) {
  uint64_t sum = 0;
  for (size_t g = 0; g < b.groups.size(); ++g) {
    const GroupStepTables& t = b.groups[g];
    KvCacheLayout gl = l;
    gl.num_layers = kGroups[g].num_layers;
    std::vector<BlockId> table(t.block_tables.begin() + t.block_table_offsets[r],
                               t.block_tables.begin() + t.block_table_offsets[r + 1]);
    for (size_t e = 0; e < table.size(); ++e) {
      if (table[e] == kNullBlockId) continue;
      const int32_t first = static_cast<int32_t>(e) * l.block_size;
      const int32_t n = std::min(l.block_size, b.reads[r].seq_len - first);
      if (n <= 0) continue;
      // One entry's tokens: a table of just this block over n tokens.
      sum += test::ref_checksum(gl, pool, {table[e]}, n);
    }
  }
  return sum;
}

// Every slot the scalar model says group g wrote holds (request, position, seed layer g * L + j)
// in tensors j < n_g; never-written slots are poison in every tensor.
int64_t ref_mismatches(const KvCacheLayout& l, const unsigned char* pool,
                       const HybridBatchGenerator& gen) {
  int64_t bad = 0;
  const int eb = l.elem_bytes();
  for (int64_t slot = 0; slot < l.num_slots(); ++slot) {
    const auto s = static_cast<size_t>(slot);
    const int64_t req = gen.slot_request()[s];
    const int32_t g = gen.slot_group()[s];
    const int32_t layers = req >= 0 ? kGroups[static_cast<size_t>(g)].num_layers : l.num_layers;
    for (int32_t j = 0; j < layers; ++j) {
      for (int32_t h = 0; h < l.num_kv_heads; ++h) {
        for (int32_t d = 0; d < l.head_dim; ++d) {
          for (int32_t kv = 0; kv < 2; ++kv) {
            const int64_t off =
                test::ref_offset(l, j, slot / l.block_size, slot % l.block_size, h, d, kv);
            const uint32_t want = req >= 0 ? test::ref_value(l, req, gen.slot_position()[s],
                                                             g * l.num_layers + j, h, d, kv)
                                           : poison_bits(eb);
            bad += test::read_bits(pool, off, eb) != want ? 1 : 0;
          }
        }
      }
    }
  }
  return bad;
}

TEST(HybridKvBackend, HostTwinMatchesTheScalarModelOfSharedTensors) {
  const KvCacheLayout l = hybrid_layout();
  HostKvBackend host(l, 0, 0, group_layers());
  HybridBatchGenerator gen(kBlocks, l.block_size, kGroups, 5);
  int64_t null_entries = 0;
  int64_t reads = 0;
  for (int step = 0; step < 200; ++step) {
    const StepBatch b = gen.next();
    host.execute(b);
    for (BlockId blk : b.groups[1].block_tables) null_entries += blk == kNullBlockId ? 1 : 0;
    const auto sums = host.last_read_checksums();
    ASSERT_EQ(sums.size(), b.reads.size());
    for (size_t r = 0; r < b.reads.size(); ++r, ++reads) {
      ASSERT_EQ(sums[r], ref_hybrid_checksum(l, host.pool().data(), b, r))
          << "step " << step << " read " << r;
    }
  }
  // The run exercised what makes the layout hybrid: window drops and many reads.
  EXPECT_GT(null_entries, 100);
  EXPECT_GT(reads, 500);
  EXPECT_EQ(ref_mismatches(l, host.pool().data(), gen), 0);
  const BackendVerification v = host.verify();
  EXPECT_TRUE(v.ok) << v.detail;
}

TEST(HybridKvBackend, VerifyChecksWhatAGroupOwnsAndOnlyThat) {
  const KvCacheLayout l = hybrid_layout();
  HybridBatchGenerator gen(kBlocks, l.block_size, kGroups, 11);
  HostKvBackend host(l, 0, 0, group_layers());
  for (int step = 0; step < 80; ++step) host.execute(gen.next());
  ASSERT_TRUE(host.verify().ok);
  // A slot last written by the 2-layer window group: its tensor 2 is not that group's, so
  // changing it is invisible (vLLM never reads it through this block); tensor 1 is checked.
  int64_t slot = -1;
  for (size_t s = 0; s < gen.slot_group().size(); ++s) {
    if (gen.slot_request()[s] >= 0 && gen.slot_group()[s] == 1) {
      slot = static_cast<int64_t>(s);
      break;
    }
  }
  ASSERT_GE(slot, 0);
  auto* pool = const_cast<unsigned char*>(host.pool().data());
  const int64_t blk = slot / l.block_size, off = slot % l.block_size;
  pool[test::ref_offset(l, 2, blk, off, 0, 0, 0)] ^= 0x5a;
  EXPECT_TRUE(host.verify().ok);
  pool[test::ref_offset(l, 1, blk, off, 1, 3, 1)] ^= 0x5a;
  const BackendVerification v = host.verify();
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.detail.find("KV cache group 1"), std::string::npos) << v.detail;
  EXPECT_NE(v.detail.find("layer 1"), std::string::npos) << v.detail;
}

TEST(HybridKvBackend, RejectsBatchesThatDoNotMatchTheGroups) {
  const KvCacheLayout l = hybrid_layout();
  HostKvBackend host(l, 0, 0, group_layers());
  HybridBatchGenerator gen(kBlocks, l.block_size, kGroups, 3);
  StepBatch b = gen.next();
  while (b.writes.empty()) b = gen.next();
  auto expect_error = [&host](const StepBatch& bad, const std::string& what) {
    try {
      host.execute(bad);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  StepBatch one_group = b;
  one_group.groups.pop_back();
  expect_error(one_group, "tables for 1 KV cache groups but the pool has 2");
  StepBatch top_level = b;
  top_level.slot_mapping = b.groups[0].slot_mapping;
  expect_error(top_level, "top-level slot_mapping");
  StepBatch uneven = b;
  uneven.groups[1].slot_mapping.push_back(kPadSlotId);
  expect_error(uneven, "groups[1].slot_mapping has");
  StepBatch out_of_range = b;
  out_of_range.groups[1].block_tables.back() = kBlocks;
  expect_error(out_of_range, "groups[1].block_tables[");
  // A single-group pool refuses a grouped batch.
  HostKvBackend plain(l, 0);
  try {
    plain.execute(b);
    ADD_FAILURE() << "a one-group pool accepted a grouped batch";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("one full-attention group"), std::string::npos)
        << e.what();
  }
  // Group layer counts outside [1, tensors].
  EXPECT_THROW(HostKvBackend(l, 0, 0, {3, 4}), std::invalid_argument);
  EXPECT_THROW(HostKvBackend(l, 0, 0, {0, 2}), std::invalid_argument);
}

TEST(HybridKvBackend, TrafficCountsEachGroupsLayersAndSkipsDroppedBlocks) {
  const KvCacheLayout l = hybrid_layout();
  HybridBatchGenerator gen(kBlocks, l.block_size, kGroups, 8);
  const std::vector<int32_t> layers = group_layers();
  for (int step = 0; step < 60; ++step) {
    const StepBatch b = gen.next();
    const StepExecution t = step_traffic(l, b, layers);
    int64_t written = 0, read = 0;
    for (size_t g = 0; g < b.groups.size(); ++g) {
      const int64_t per_token = l.token_layer_bytes() * layers[g];
      for (int64_t s : b.groups[g].slot_mapping) written += s >= 0 ? per_token : 0;
      for (size_t r = 0; r < b.reads.size(); ++r) {
        for (int32_t e = b.groups[g].block_table_offsets[r];
             e < b.groups[g].block_table_offsets[r + 1]; ++e) {
          if (b.groups[g].block_tables[static_cast<size_t>(e)] == kNullBlockId) continue;
          const int32_t first = (e - b.groups[g].block_table_offsets[r]) * l.block_size;
          read += per_token * std::clamp(b.reads[r].seq_len - first, 0, l.block_size);
        }
      }
    }
    EXPECT_EQ(t.bytes_written, written) << "step " << step;
    EXPECT_EQ(t.bytes_read, written + read) << "step " << step;
  }
}

TEST(HybridKvBackend, ConfigFromAPlanSharesTensorsAcrossGroups) {
  PlanInputs in;
  in.model = find_model_preset("gpt-oss-20b");
  in.gpu = find_gpu_preset("h100-80g");
  in.max_model_len = 8192;
  in.kv_cache_memory_bytes = int64_t{1} << 30;
  const Plan plan = compute_plan(in);
  ASSERT_EQ(plan.kv_cache_config.kv_cache_groups.size(), 2u);
  const KvBackendConfig bc = kv_backend_config_for(plan, KvBackendKind::kHost, 16, 0, 0);
  // gpt-oss-20b: 24 layers, 12 full + 12 sliding: 12 tensors, each shared by one layer of each.
  EXPECT_EQ(bc.num_layers, 12);
  EXPECT_EQ(bc.group_num_layers, (std::vector<int32_t>{12, 12}));
  EXPECT_EQ(bc.num_blocks, plan.num_gpu_blocks);
  KvBackendConfig capped = kv_backend_config_for(plan, KvBackendKind::kHost, 16, 0, 2);
  EXPECT_EQ(capped.pool_layout().num_layers, 2);
  EXPECT_EQ(capped.pool_group_num_layers(), (std::vector<int32_t>{2, 2}));
  EXPECT_EQ(capped.pool_model_layers(), 4);
  EXPECT_EQ(bc.pool_model_layers(), 24);
  // A full-attention model keeps one group and every layer.
  PlanInputs dense = in;
  dense.model = find_model_preset("qwen3-8b");
  dense.kv_cache_memory_bytes = int64_t{4} << 30;
  const KvBackendConfig d =
      kv_backend_config_for(compute_plan(dense), KvBackendKind::kHost, 16, 0, 0);
  EXPECT_TRUE(d.group_num_layers.empty());
  EXPECT_EQ(d.num_layers, 36);
}

TEST(HybridKvBackend, CudaMatchesHostTwinStepByStep) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const KvCacheLayout l = hybrid_layout();
  HostKvBackend host(l, 0, 0, group_layers());
  CudaKvBackend cuda(l, 0, group_layers());
  HybridBatchGenerator gen(kBlocks, l.block_size, kGroups, 21);
  for (int step = 0; step < 150; ++step) {
    const StepBatch b = gen.next();
    const StepExecution h = host.execute(b);
    const StepExecution d = cuda.execute(b);
    EXPECT_EQ(h.bytes_read, d.bytes_read);
    ASSERT_EQ(
        std::vector<uint64_t>(host.last_read_checksums().begin(), host.last_read_checksums().end()),
        std::vector<uint64_t>(cuda.last_read_checksums().begin(), cuda.last_read_checksums().end()))
        << "step " << step;
  }
  const BackendVerification v = cuda.verify();
  EXPECT_TRUE(v.ok) << v.detail;
}

}  // namespace
}  // namespace kvsim
