// Routers (router.h), the consistent-hash ring, the seeded generator and the staleness snapshot,
// tested on hand-made replica views.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvsim/core/request.h"
#include "kvsim/sim/cluster/hash_ring.h"
#include "kvsim/sim/cluster/replica_snapshot.h"
#include "kvsim/sim/cluster/router.h"
#include "kvsim/sim/cluster/router_rng.h"

namespace kvsim {
namespace {

// A probe that answers from a table: cached[replica].
class TableProbe final : public PrefixProbe {
 public:
  std::vector<int32_t> cached;
  int32_t cached_prefix_tokens(int32_t replica, const Request&) const override {
    return cached[static_cast<size_t>(replica)];
  }
};

Request prompt_request(int64_t id, std::vector<int32_t> tokens) {
  Request r;
  r.request_id = id;
  r.num_prompt_tokens = static_cast<int32_t>(tokens.size());
  r.max_tokens = 1;
  r.content.token_ids = std::make_shared<std::vector<int32_t>>(std::move(tokens));
  r.content.salt = static_cast<uint64_t>(id) + 1;
  r.enable_block_hashing(4);
  return r;
}

std::vector<ReplicaView> idle(size_t n) {
  return std::vector<ReplicaView>(n);
}

TEST(RouterNames, RoundTripAndUnknownNamesListTheValidOnes) {
  for (int p = 0; p < kNumRouterPolicies; ++p) {
    const auto policy = static_cast<RouterPolicy>(p);
    EXPECT_EQ(parse_router_policy(to_string(policy)), policy);
  }
  try {
    parse_router_policy("least-loaded");
    FAIL();
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'least-loaded'"), std::string::npos) << m;
    EXPECT_NE(m.find("round-robin, random, least-outstanding, least-kv, power-of-two, "
                     "prefix-affinity, kv-aware"),
              std::string::npos)
        << m;
  }
}

TEST(SplitMix64, ReferenceOutputAndUnbiasedRange) {
  SplitMix64 g(0);
  EXPECT_EQ(g.next(), 0xE220A8397B1DCDAFULL);  // SplitMix64's published first output for seed 0
  SplitMix64 h(42);
  std::vector<int> counts(3, 0);
  for (int i = 0; i < 3000; ++i) counts[h.uniform(3)] += 1;
  for (int c : counts) EXPECT_NEAR(c, 1000, 120);
}

TEST(HashRing, BalancedAndConsistent) {
  const HashRing four(4, 160, 9);
  std::map<int32_t, int> share;
  SplitMix64 keys(1);
  std::vector<uint64_t> sample;
  for (int i = 0; i < 8000; ++i) sample.push_back(keys.next());
  for (uint64_t k : sample) share[four.owner(k)] += 1;
  ASSERT_EQ(share.size(), 4U);
  for (const auto& [replica, n] : share) EXPECT_NEAR(n, 2000, 400) << replica;
  // A fifth replica takes keys only for itself; every other key keeps its owner.
  const HashRing five(5, 160, 9);
  int moved = 0;
  for (uint64_t k : sample) {
    if (five.owner(k) != four.owner(k)) {
      EXPECT_EQ(five.owner(k), 4);
      ++moved;
    }
  }
  EXPECT_NEAR(moved, 8000 / 5, 400);
  // first_accepting walks past refusing replicas, each once.
  std::vector<int32_t> asked;
  EXPECT_EQ(four.first_accepting(sample[0],
                                 [&](int32_t r) {
                                   asked.push_back(r);
                                   return false;
                                 }),
            -1);
  EXPECT_EQ(std::set<int32_t>(asked.begin(), asked.end()).size(), 4U);
  EXPECT_EQ(asked.size(), 4U);
  EXPECT_EQ(asked.front(), four.owner(sample[0]));
  EXPECT_THROW(HashRing(0, 10, 1), std::invalid_argument);
}

TEST(Routers, LoadPoliciesPickAsDocumented) {
  TableProbe probe;
  const Request r = prompt_request(0, {1, 2, 3, 4, 5});
  std::vector<ReplicaView> v = idle(3);
  v[0].outstanding = 5;
  v[1].outstanding = 2;
  v[2].outstanding = 2;
  v[0].kv_usage = 0.1;
  v[1].kv_usage = 0.5;
  v[2].kv_usage = 0.1;
  ClusterConfig c;
  c.replicas = 3;
  c.router = RouterPolicy::ROUND_ROBIN;
  auto rr = make_router(c);
  EXPECT_EQ(rr->route(r, v, probe), 0);
  EXPECT_EQ(rr->route(r, v, probe), 1);
  EXPECT_EQ(rr->route(r, v, probe), 2);
  EXPECT_EQ(rr->route(r, v, probe), 0);
  c.router = RouterPolicy::LEAST_OUTSTANDING;
  EXPECT_EQ(make_router(c)->route(r, v, probe), 1);  // 1 and 2 tie: lowest index
  c.router = RouterPolicy::LEAST_KV;
  EXPECT_EQ(make_router(c)->route(r, v, probe), 2);  // 0 and 2 tie on usage: fewer outstanding
  c.router = RouterPolicy::POWER_OF_TWO;
  auto p2 = make_router(c);
  for (int i = 0; i < 50; ++i) {
    const int32_t pick = p2->route(r, v, probe);
    EXPECT_NE(pick, 0) << "replica 0 is never the less loaded of two distinct replicas";
  }
  c.router = RouterPolicy::RANDOM;
  auto rnd = make_router(c);
  std::set<int32_t> seen;
  for (int i = 0; i < 60; ++i) seen.insert(rnd->route(r, v, probe));
  EXPECT_EQ(seen.size(), 3U);
}

TEST(Routers, PrefixAffinityKeysOnTheLeadingBlocksWithBoundedLoad) {
  TableProbe probe;
  ClusterConfig c;
  c.replicas = 8;
  c.router = RouterPolicy::PREFIX_AFFINITY;
  c.affinity_prefix_blocks = 2;
  auto router = make_router(c);
  EXPECT_TRUE(router->needs_block_hashes());
  const std::vector<ReplicaView> v = idle(8);
  // Same first 2 blocks (8 tokens), different tails: same replica.
  const Request a = prompt_request(1, {1, 1, 1, 1, 2, 2, 2, 2, 7, 7, 7, 7});
  const Request b = prompt_request(2, {1, 1, 1, 1, 2, 2, 2, 2, 9, 9, 9, 9, 9});
  EXPECT_EQ(router->route(a, v, probe), router->route(b, v, probe));
  // Different leading blocks spread over replicas.
  std::set<int32_t> owners;
  for (int k = 0; k < 40; ++k) {
    owners.insert(router->route(prompt_request(10 + k, {k, k, k, k, 0, 0, 0, 0}), v, probe));
  }
  EXPECT_GE(owners.size(), 6U);
  // Bounded load: the owner above ceil(1.25 * mean) is skipped.
  std::vector<ReplicaView> busy = idle(8);
  const int32_t owner = router->route(a, v, probe);
  busy[static_cast<size_t>(owner)].outstanding = 10;  // mean (10 + 1) / 8, cap 2
  EXPECT_NE(router->route(a, busy, probe), owner);
}

TEST(Routers, KvAwareWeighsCachedPrefixAgainstLoad) {
  ClusterConfig c;
  c.replicas = 3;
  c.router = RouterPolicy::KV_AWARE;
  c.kv_aware_load_weight = 1.0;
  auto router = make_router(c);
  const Request r = prompt_request(0, std::vector<int32_t>(100, 3));
  TableProbe probe;
  probe.cached = {0, 80, 40};
  std::vector<ReplicaView> v = idle(3);
  EXPECT_EQ(router->route(r, v, probe), 1);  // longest cached prefix, no load anywhere
  v[1].outstanding = 10;                     // 0.8 - 1.0 < 0.4 - 0.2 ...
  v[2].outstanding = 2;
  EXPECT_EQ(router->route(r, v, probe), 2);
  probe.cached = {0, 0, 0};  // nothing cached: the least loaded
  EXPECT_EQ(router->route(r, v, probe), 0);
}

TEST(ReplicaSnapshots, StaleViewIsTheLastScrapePlusOwnRouting) {
  std::vector<ReplicaView> live(2);
  ReplicaSnapshots s(2, 1000, [&](int32_t i) { return live[static_cast<size_t>(i)]; });
  s.before_event(0);  // scrape at 0
  live[0].outstanding = 7;
  live[0].kv_usage = 0.5;
  s.on_routed(1, 30);
  auto v = s.views();
  EXPECT_EQ(v[0].outstanding, 0);  // the change after the scrape is unseen
  EXPECT_EQ(v[0].kv_usage, 0.0);
  EXPECT_EQ(v[1].outstanding, 1);  // but the router's own routing is known
  EXPECT_EQ(v[1].queued_requests, 1);
  EXPECT_EQ(v[1].queued_tokens, 30);
  s.before_event(999);  // still before the next scrape at 1000
  EXPECT_EQ(s.views()[0].outstanding, 0);
  live[1].outstanding = 4;
  s.before_event(2500);  // scrapes (the state at 2000: no event between 999 and 2500)
  v = s.views();
  EXPECT_EQ(v[0].outstanding, 7);
  EXPECT_EQ(v[0].kv_usage, 0.5);
  EXPECT_EQ(v[1].outstanding, 4);  // routed-since counts were reset by the scrape
  EXPECT_EQ(s.num_scrapes(), 2);
  // Staleness 0: always the live state.
  ReplicaSnapshots live_view(2, 0, [&](int32_t i) { return live[static_cast<size_t>(i)]; });
  live[0].outstanding = 11;
  EXPECT_EQ(live_view.views()[0].outstanding, 11);
}

}  // namespace
}  // namespace kvsim
