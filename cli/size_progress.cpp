#include "size_progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include <fmt/core.h>

namespace kvsim::cli {
namespace {

// Measured on the worked example (docs/size.md): 51.6 CPU-s for 52 replays of 19,366 requests.
constexpr double kSecondsPerRequestReplay = 51.6 / (52.0 * 19366.0);
constexpr double kReplaysPerCandidate = 2.0;

std::string duration(double s) {
  if (s < 1) return "<1 s";
  if (s < 90) return fmt::format("{:.0f} s", s);
  if (s < 5400) return fmt::format("{:.0f} min", s / 60);
  return fmt::format("{:.1f} h", s / 3600);
}

}  // namespace

double estimate_size_seconds(int64_t candidates, int64_t requests, int32_t jobs) {
  return static_cast<double>(candidates) * kReplaysPerCandidate * static_cast<double>(requests) *
         kSecondsPerRequestReplay / std::max(jobs, 1);
}

SizeProgress::SizeProgress(int64_t candidates, int64_t requests, int32_t jobs)
    : total_(candidates),
      bar_(candidates > 0 && ::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {
  if (candidates >= kLargeSizeGrid) {
    fmt::print(stderr,
               "kvsim size: searching {} candidates over {} requests with {} job{}; estimated "
               "~{} (a rough guess: ~{:.0f} replays per candidate at ~{:.0f} us per request; "
               "candidates that need many replicas take longer)\n",
               candidates, requests, jobs, jobs == 1 ? "" : "s",
               duration(estimate_size_seconds(candidates, requests, jobs)), kReplaysPerCandidate,
               kSecondsPerRequestReplay * 1e6);
  }
  if (bar_) {
    std::lock_guard lock(mutex_);
    draw();
  }
}

SizeProgress::~SizeProgress() {
  if (bar_) {
    fmt::print(stderr, "\r\033[K");  // the summary line takes its place
    std::fflush(stderr);
  }
}

void SizeProgress::candidate_done() {
  std::lock_guard lock(mutex_);
  ++done_;
  if (bar_) draw();
}

void SizeProgress::draw() {
  constexpr int kWidth = 30;
  const auto filled = static_cast<int>(kWidth * done_ / std::max<int64_t>(total_, 1));
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string left;
  if (done_ > 0 && done_ < total_) {
    left = fmt::format(", ~{} left", duration(elapsed / static_cast<double>(done_) *
                                              static_cast<double>(total_ - done_)));
  }
  fmt::print(stderr, "\r\033[Kkvsim size: [{}{}] {}/{} candidates, {} elapsed{}",
             std::string(static_cast<size_t>(filled), '#'),
             std::string(static_cast<size_t>(kWidth - filled), '.'), done_, total_,
             duration(elapsed), left);
  std::fflush(stderr);
}

}  // namespace kvsim::cli
