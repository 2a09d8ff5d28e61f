#include "kvsim/sim/sweep/run_units_in_order.h"

#include <algorithm>
#include <atomic>
#include <new>
#include <stdexcept>
#include <thread>

#include <fmt/core.h>

#include "kvsim/core/param.h"

namespace kvsim {

std::vector<std::exception_ptr> run_units_in_order(size_t num_units, int32_t jobs,
                                                   const std::function<void(size_t)>& body) {
  if (jobs < 1) {
    throw std::invalid_argument(fmt::format("{} must be >= 1, got {}", param("jobs"), jobs));
  }
  std::vector<std::exception_ptr> errors(num_units);
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  auto work = [&] {
    while (!stop.load(std::memory_order_relaxed)) {
      const size_t u = next.fetch_add(1);
      if (u >= num_units) return;
      try {
        body(u);
      } catch (...) {
        errors[u] = std::current_exception();
        stop.store(true, std::memory_order_relaxed);
        return;
      }
    }
  };
  const size_t num_threads = std::min<size_t>(static_cast<size_t>(jobs), num_units);
  if (num_threads <= 1) {
    work();
  } else {
    std::vector<std::jthread> threads;
    threads.reserve(num_threads);
    for (size_t t = 0; t < num_threads; ++t) threads.emplace_back(work);
  }
  return errors;
}

void rethrow_with_context(const std::exception_ptr& error, const std::string& where) {
  try {
    std::rethrow_exception(error);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::invalid_argument& e) {
    std::throw_with_nested(std::invalid_argument(fmt::format("{}: {}", where, e.what())));
  } catch (const std::exception& e) {
    std::throw_with_nested(std::runtime_error(fmt::format("{}: {}", where, e.what())));
  } catch (...) {
    std::throw_with_nested(std::runtime_error(where + ": unknown error"));
  }
}

}  // namespace kvsim
