// kvsim size's replica search against fake runners (deterministic functions of the replica
// count): monotone, non-monotone, unreachable, and the bound cases.
#include <cstdint>
#include <functional>
#include <set>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "kvsim/sim/sweep/size.h"

namespace kvsim {
namespace {

// A trial that passes iff `pass(n)`, recording every count it was asked for.
struct FakeTrial {
  std::function<bool(int32_t)> pass;
  std::vector<int32_t> asked;
  ReplicaTrial trial() {
    return [this](int32_t n) {
      asked.push_back(n);
      SizeTrial t;
      t.meets_slo = pass(n);
      t.stopped_early = !t.meets_slo;
      t.ttft_p99_s = 10.0 / n;
      t.mean_running_per_replica = 100.0 / n;
      return t;
    };
  }
};

TEST(SizeSearch, MonotoneFindsTheMinimumForEveryThreshold) {
  for (int32_t need = 1; need <= 70; ++need) {
    FakeTrial f{[need](int32_t n) { return n >= need; }, {}};
    const ReplicaSearch s = search_min_replicas(f.trial(), 64);
    if (need > 64) {
      EXPECT_FALSE(s.replicas) << need;
      EXPECT_EQ(s.reported().replicas, 64);
      continue;
    }
    ASSERT_TRUE(s.replicas) << need;
    EXPECT_EQ(*s.replicas, need);
    EXPECT_TRUE(s.reported().meets_slo);
    EXPECT_EQ(s.reported().replicas, need);
    EXPECT_DOUBLE_EQ(s.reported().ttft_p99_s, 10.0 / need);
    // Exponential then binary: about 2 log2(need) trials, never the same count twice.
    EXPECT_LE(s.trials.size(), 13u) << need;
    EXPECT_EQ(std::set<int32_t>(f.asked.begin(), f.asked.end()).size(), f.asked.size());
  }
}

TEST(SizeSearch, ProbeOrderIsExponentialThenBinary) {
  FakeTrial f{[](int32_t n) { return n >= 11; }, {}};
  const ReplicaSearch s = search_min_replicas(f.trial(), 64);
  EXPECT_EQ(f.asked, (std::vector<int32_t>{1, 2, 4, 8, 16, 12, 10, 11}));
  EXPECT_EQ(*s.replicas, 11);
}

TEST(SizeSearch, ExponentialPhaseIsCappedAtMaxReplicas) {
  FakeTrial f{[](int32_t n) { return n >= 20; }, {}};
  const ReplicaSearch s = search_min_replicas(f.trial(), 24);
  EXPECT_EQ(f.asked, (std::vector<int32_t>{1, 2, 4, 8, 16, 24, 20, 18, 19}));
  EXPECT_EQ(*s.replicas, 20);
}

TEST(SizeSearch, UnreachableReportsTheTrialAtMaxReplicas) {
  FakeTrial f{[](int32_t) { return false; }, {}};
  const ReplicaSearch s = search_min_replicas(f.trial(), 5);
  EXPECT_FALSE(s.replicas);
  EXPECT_EQ(f.asked, (std::vector<int32_t>{1, 2, 4, 5}));
  EXPECT_EQ(s.reported().replicas, 5);
  EXPECT_FALSE(s.reported().meets_slo);
}

TEST(SizeSearch, OneReplicaBound) {
  FakeTrial pass{[](int32_t) { return true; }, {}};
  EXPECT_EQ(*search_min_replicas(pass.trial(), 1).replicas, 1);
  FakeTrial fail{[](int32_t) { return false; }, {}};
  EXPECT_FALSE(search_min_replicas(fail.trial(), 1).replicas);
  EXPECT_EQ(fail.asked, (std::vector<int32_t>{1}));
}

TEST(SizeSearch, RefusesMaxReplicasBelowOne) {
  FakeTrial f{[](int32_t) { return true; }, {}};
  EXPECT_THROW(search_min_replicas(f.trial(), 0), std::invalid_argument);
  EXPECT_TRUE(f.asked.empty());
}

// Non-monotone runners (a seeded router, admission control, a p99 on the edge): the answer is
// always a count that was run and passed, though it need not be the smallest passing count.
TEST(SizeSearch, NonMonotoneAnswerIsAlwaysVerified) {
  // Passes at 3 by luck, fails at 4..7, passes from 8 on except 6: the exponential phase
  // (1, 2, 4 fail, 8 passes) never sees 3; bisection tests 6 (fail) and 7 (fail).
  FakeTrial f{[](int32_t n) { return n == 3 || (n >= 8 && n != 6); }, {}};
  const ReplicaSearch s = search_min_replicas(f.trial(), 64);
  ASSERT_TRUE(s.replicas);
  EXPECT_EQ(*s.replicas, 8);  // verified, not minimal: 3 also passes
  EXPECT_TRUE(s.reported().meets_slo);
  EXPECT_EQ(s.reported().replicas, 8);

  // Passes at 5 and at 8 but not 6 or 7: bisection between 4 and 8 tests 6 (fail), 7 (fail)
  // and keeps 8, whose trial passed.
  FakeTrial g{[](int32_t n) { return n == 5 || n >= 8; }, {}};
  EXPECT_EQ(*search_min_replicas(g.trial(), 64).replicas, 8);

  // Passes at 2 but fails at 3 (and beyond until 16): bisection between 1 and 2 is not needed,
  // 2 is returned because it was verified.
  FakeTrial h{[](int32_t n) { return n == 2 || n >= 16; }, {}};
  EXPECT_EQ(*search_min_replicas(h.trial(), 64).replicas, 2);

  // Exhaustively over every pass/fail pattern on 1..8: the answer, when any, passed.
  for (uint32_t mask = 0; mask < 256; ++mask) {
    FakeTrial m{[mask](int32_t n) { return ((mask >> (n - 1)) & 1u) != 0; }, {}};
    const ReplicaSearch r = search_min_replicas(m.trial(), 8);
    if (r.replicas) {
      EXPECT_TRUE((mask >> (*r.replicas - 1)) & 1u) << mask;
      EXPECT_TRUE(r.reported().meets_slo) << mask;
    } else {
      // Only when every probe failed, including max_replicas.
      EXPECT_FALSE((mask >> 7) & 1u) << mask;
    }
  }
}

TEST(SizeSearch, WarmStartFromARightGuessCostsTwoProbes) {
  FakeTrial f{[](int32_t n) { return n >= 11; }, {}};
  const ReplicaSearch s = search_min_replicas(f.trial(), 64, 11);
  EXPECT_EQ(f.asked, (std::vector<int32_t>{11, 10}));
  EXPECT_EQ(*s.replicas, 11);
}

TEST(SizeSearch, WarmStartGallopsDownAndUp) {
  // Too high: 40 passes, 39, 37, 33, 25 pass, 9 fails; bisect 9..25.
  FakeTrial down{[](int32_t n) { return n >= 11; }, {}};
  EXPECT_EQ(*search_min_replicas(down.trial(), 64, 40).replicas, 11);
  EXPECT_EQ(down.asked, (std::vector<int32_t>{40, 39, 37, 33, 25, 9, 17, 13, 11, 10}));
  // Too low: 5 fails, 6, 8 fail, 12 passes; bisect 8..12.
  FakeTrial up{[](int32_t n) { return n >= 11; }, {}};
  EXPECT_EQ(*search_min_replicas(up.trial(), 64, 5).replicas, 11);
  EXPECT_EQ(up.asked, (std::vector<int32_t>{5, 6, 8, 12, 10, 11}));
  // Down to 1.
  FakeTrial one{[](int32_t) { return true; }, {}};
  EXPECT_EQ(*search_min_replicas(one.trial(), 64, 6).replicas, 1);
  EXPECT_EQ(one.asked, (std::vector<int32_t>{6, 5, 3, 1}));
  // A guess at max_replicas that fails: unreachable after one probe.
  FakeTrial never{[](int32_t) { return false; }, {}};
  EXPECT_FALSE(search_min_replicas(never.trial(), 64, 64).replicas);
  EXPECT_EQ(never.asked, (std::vector<int32_t>{64}));
  EXPECT_THROW(search_min_replicas(never.trial(), 64, 0), std::invalid_argument);
  EXPECT_THROW(search_min_replicas(never.trial(), 64, 65), std::invalid_argument);
}

TEST(SizeSearch, MonotoneWarmStartFindsTheMinimumFromAnyGuess) {
  for (int32_t need = 1; need <= 20; ++need) {
    for (int32_t guess = 1; guess <= 16; ++guess) {
      FakeTrial f{[need](int32_t n) { return n >= need; }, {}};
      const ReplicaSearch s = search_min_replicas(f.trial(), 16, guess);
      if (need > 16) {
        EXPECT_FALSE(s.replicas);
      } else {
        EXPECT_EQ(s.replicas.value_or(-1), need) << need << " " << guess;
      }
    }
  }
}

TEST(SizeSearch, NonMonotoneWarmStartAnswerIsAlwaysVerified) {
  for (uint32_t mask = 0; mask < 256; ++mask) {
    for (int32_t guess = 1; guess <= 8; ++guess) {
      FakeTrial m{[mask](int32_t n) { return ((mask >> (n - 1)) & 1u) != 0; }, {}};
      const ReplicaSearch r = search_min_replicas(m.trial(), 8, guess);
      if (r.replicas) {
        EXPECT_TRUE((mask >> (*r.replicas - 1)) & 1u) << mask << " " << guess;
        EXPECT_TRUE(r.reported().meets_slo);
      } else {
        EXPECT_FALSE((mask >> 7) & 1u) << mask << " " << guess;  // max_replicas was probed
      }
    }
  }
}

TEST(SizeSearch, TrialErrorsPropagate) {
  const ReplicaTrial boom = [](int32_t n) -> SizeTrial {
    if (n == 4) throw std::runtime_error("replay failed");
    return {};
  };
  EXPECT_THROW(search_min_replicas(boom, 64), std::runtime_error);
}

}  // namespace
}  // namespace kvsim
