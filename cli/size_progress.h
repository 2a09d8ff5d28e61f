// kvsim size's progress on stderr. A large grid can run for many minutes with nothing to show,
// so a search of at least kLargeSizeGrid candidates announces itself with one line (the count
// and a rough time estimate), and on a terminal every search redraws a bar of candidates done /
// total. Nothing but that start line is written when stderr is a file or a pipe (logs stay
// clean).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace kvsim::cli {

inline constexpr int64_t kLargeSizeGrid = 16;

class SizeProgress {
 public:
  // `candidates`: those this run searches (its shard's); `requests`: the trace's.
  SizeProgress(int64_t candidates, int64_t requests, int32_t jobs);
  SizeProgress(const SizeProgress&) = delete;
  SizeProgress& operator=(const SizeProgress&) = delete;
  // Erases the bar, if one was drawn.
  ~SizeProgress();
  // One more candidate searched; thread-safe.
  void candidate_done();

 private:
  void draw();  // with mutex_ held

  int64_t total_;
  int64_t done_ = 0;
  bool bar_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
};

// The rough run time of a search, in seconds: about two replays per candidate (a warm-started
// candidate costs one passing and one early-stopped failing replay) at ~50 us of CPU per request
// per replay (docs/size.md, Speed), over `jobs` threads. An estimate, not a promise: candidates
// that need many replicas, or a wide --max-replicas gallop, take several times longer.
double estimate_size_seconds(int64_t candidates, int64_t requests, int32_t jobs);

}  // namespace kvsim::cli
