// The parallel runner of kvsim sweep and kvsim size: independent units of work (grid points,
// groups of candidates) on a few threads, with errors that do not depend on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace kvsim {

// Runs body(0) .. body(num_units - 1) on min(jobs, num_units) threads (the calling thread alone
// when that is 1). Workers claim units in index order, and a unit's body writes only its own
// results. After a unit throws, no new unit is claimed; claimed units run to their end. Because
// claims are ordered, every unit below a failing one was claimed and completed, so the lowest
// failing unit overall is always among the failures, whatever `jobs` is.
// Returns one entry per unit: the exception its body threw, or null. jobs must be >= 1.
std::vector<std::exception_ptr> run_units_in_order(size_t num_units, int32_t jobs,
                                                   const std::function<void(size_t)>& body);

// Rethrows `error` with `where` in front of its message (the original nested): invalid_argument
// stays invalid_argument, any other exception becomes runtime_error, std::bad_alloc is rethrown
// as it is (an out-of-memory report must stay one).
[[noreturn]] void rethrow_with_context(const std::exception_ptr& error, const std::string& where);

}  // namespace kvsim
