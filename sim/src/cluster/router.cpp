#include "kvsim/sim/cluster/router.h"

#include <array>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "router_policies.h"

namespace kvsim {
namespace {

constexpr std::array<std::string_view, kNumRouterPolicies> kRouterNames = {
    "round-robin",  "random",          "least-outstanding", "least-kv",
    "power-of-two", "prefix-affinity", "kv-aware"};

}  // namespace

std::string_view to_string(RouterPolicy p) {
  const auto i = static_cast<size_t>(p);
  return i < kRouterNames.size() ? kRouterNames[i] : std::string_view("unknown");
}

RouterPolicy parse_router_policy(std::string_view name) {
  for (size_t i = 0; i < kRouterNames.size(); ++i) {
    if (kRouterNames[i] == name) return static_cast<RouterPolicy>(i);
  }
  std::string valid;
  for (std::string_view n : kRouterNames)
    valid += fmt::format("{}{}", valid.empty() ? "" : ", ", n);
  throw std::invalid_argument(fmt::format("unknown router '{}' (valid: {})", name, valid));
}

std::unique_ptr<Router> make_router(const ClusterConfig& c) {
  switch (c.router) {
    case RouterPolicy::ROUND_ROBIN:
      return std::make_unique<detail::RoundRobinRouter>();
    case RouterPolicy::RANDOM:
      return std::make_unique<detail::RandomRouter>(c.seed);
    case RouterPolicy::LEAST_OUTSTANDING:
      return std::make_unique<detail::LeastOutstandingRouter>();
    case RouterPolicy::LEAST_KV:
      return std::make_unique<detail::LeastKvRouter>();
    case RouterPolicy::POWER_OF_TWO:
      return std::make_unique<detail::PowerOfTwoRouter>(c.seed);
    case RouterPolicy::PREFIX_AFFINITY:
      return std::make_unique<detail::PrefixAffinityRouter>(
          c.replicas, c.seed, c.affinity_prefix_blocks, c.affinity_load_factor);
    case RouterPolicy::KV_AWARE:
      return std::make_unique<detail::KvAwareRouter>(c.kv_aware_load_weight);
  }
  throw std::invalid_argument(fmt::format("unknown router policy {}", static_cast<int>(c.router)));
}

}  // namespace kvsim
