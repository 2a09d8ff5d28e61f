// Timeline and per-request CSV writers.
#include <ostream>

#include <fmt/format.h>

#include "kvsim/sim/report/report.h"
#include "report_csv_rows.h"

namespace kvsim {

std::string_view to_string(AdmissionStop s) {
  switch (s) {
    case AdmissionStop::QUEUE_EMPTY:
      return "queue_empty";
    case AdmissionStop::TOKEN_BUDGET:
      return "token_budget";
    case AdmissionStop::MAX_NUM_SEQS:
      return "max_num_seqs";
    case AdmissionStop::KV_CACHE:
      return "kv_cache";
    case AdmissionStop::PREEMPTED:
      return "preempted";
  }
  return "unknown";
}

std::string format_seconds(int64_t ns) {
  if (ns < 0) return "";
  return fmt::format("{}.{:09d}", ns / 1'000'000'000, ns % 1'000'000'000);
}

namespace detail {

void append_timeline_row(fmt::memory_buffer& buf, const TimelineRow& r) {
  fmt::format_to(std::back_inserter(buf), "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                 r.step, format_seconds(r.time_ns), format_seconds(r.duration_ns), r.running,
                 r.waiting, r.scheduled_reqs, r.scheduled_tokens, r.prefill_tokens, r.decode_tokens,
                 r.used_blocks, r.free_blocks, r.cached_blocks, r.padding_tokens, r.preemptions,
                 to_string(r.admission_stop), r.swap_out_blocks, r.swap_in_blocks,
                 r.host_slots_used);
}

}  // namespace detail

void write_timeline_csv(std::ostream& os, std::span<const TimelineRow> rows) {
  os << detail::kTimelineCsvHeader << "\n";
  fmt::memory_buffer buf;
  for (const TimelineRow& r : rows) {
    buf.clear();
    detail::append_timeline_row(buf, r);
    os.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  }
}

namespace {
std::string diff_seconds(int64_t later, int64_t earlier) {
  return later < 0 || earlier < 0 ? std::string() : format_seconds(later - earlier);
}
}  // namespace

namespace detail {

void append_request_row(fmt::memory_buffer& buf, const RequestRecord& r,
                        std::string_view reject_reason) {
  const char* status = r.finished ? "finished" : r.rejected ? "rejected" : "unfinished";
  fmt::format_to(std::back_inserter(buf),
                 "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.request_id,
                 r.source_line, format_seconds(r.arrival_ns), r.prompt_tokens, r.max_tokens,
                 r.output_tokens, r.priority, format_seconds(r.first_scheduled_ns),
                 format_seconds(r.first_token_ns), format_seconds(r.finish_ns),
                 diff_seconds(r.first_scheduled_ns, r.arrival_ns),
                 diff_seconds(r.first_token_ns, r.arrival_ns),
                 diff_seconds(r.finish_ns, r.arrival_ns), r.preemptions, r.scheduled_tokens,
                 r.recomputed_tokens, r.prefix_hit_tokens, status, reject_reason, r.swap_outs);
}

}  // namespace detail

void write_requests_csv(std::ostream& os, std::span<const RequestRecord> records) {
  os << detail::kRequestsCsvHeader << "\n";
  fmt::memory_buffer buf;
  for (const RequestRecord& r : records) {
    buf.clear();
    detail::append_request_row(buf, r,
                               r.rejected ? to_string(r.reject_reason) : std::string_view());
    os.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  }
}

}  // namespace kvsim
