// Timeline and per-request CSV writers.
#include <ostream>
#include <stdexcept>

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

char* put_timeline_row(char* p, const TimelineRow& r) {
  p = put_int(p, r.step);
  *p++ = ',';
  p = put_seconds(p, r.time_ns);
  *p++ = ',';
  p = put_seconds(p, r.duration_ns);
  for (const int64_t v :
       {int64_t{r.running}, int64_t{r.waiting}, int64_t{r.scheduled_reqs}, r.scheduled_tokens,
        r.prefill_tokens, r.decode_tokens, int64_t{r.used_blocks}, int64_t{r.free_blocks},
        r.cached_blocks, r.padding_tokens, int64_t{r.preemptions}}) {
    *p++ = ',';
    p = put_int(p, v);
  }
  *p++ = ',';
  p = put_text(p, to_string(r.admission_stop));
  for (const int64_t v :
       {int64_t{r.swap_out_blocks}, int64_t{r.swap_in_blocks}, r.host_slots_used}) {
    *p++ = ',';
    p = put_int(p, v);
  }
  *p++ = '\n';
  return p;
}

namespace {
// diff_seconds(later, earlier): empty when either time is -1 (never).
char* put_interval(char* p, int64_t later, int64_t earlier) {
  return later < 0 || earlier < 0 ? p : put_seconds(p, later - earlier);
}
}  // namespace

char* put_request_row(char* p, const RequestRecord& r, std::string_view reject_reason) {
  const std::string_view status = r.finished ? "finished" : r.rejected ? "rejected" : "unfinished";
  p = put_int(p, r.request_id);
  *p++ = ',';
  p = put_int(p, r.source_line);
  *p++ = ',';
  p = put_seconds(p, r.arrival_ns);
  for (const int64_t v : {int64_t{r.prompt_tokens}, int64_t{r.max_tokens}, int64_t{r.output_tokens},
                          int64_t{r.priority}}) {
    *p++ = ',';
    p = put_int(p, v);
  }
  for (const int64_t t : {r.first_scheduled_ns, r.first_token_ns, r.finish_ns}) {
    *p++ = ',';
    p = put_seconds(p, t);
  }
  for (const int64_t t : {r.first_scheduled_ns, r.first_token_ns, r.finish_ns}) {
    *p++ = ',';
    p = put_interval(p, t, r.arrival_ns);
  }
  for (const int64_t v : {int64_t{r.preemptions}, int64_t{r.scheduled_tokens},
                          int64_t{r.recomputed_tokens}, int64_t{r.prefix_hit_tokens}}) {
    *p++ = ',';
    p = put_int(p, v);
  }
  *p++ = ',';
  p = put_text(p, status);
  *p++ = ',';
  p = put_text(p, reject_reason);
  *p++ = ',';
  p = put_int(p, r.swap_outs);
  *p++ = '\n';
  return p;
}

}  // namespace detail

TimelineCsvWriter::TimelineCsvWriter(std::ostream& os)
    : os_(os), buf_(new char[detail::kCsvFlushBytes + detail::kMaxCsvRow]) {
  os_ << detail::kTimelineCsvHeader << "\n";
}

TimelineCsvWriter::~TimelineCsvWriter() = default;

void TimelineCsvWriter::add(const TimelineRow& row) {
  if (finished_) throw std::logic_error("TimelineCsvWriter: add() after finish()");
  char* const begin = buf_.get();
  size_ = static_cast<size_t>(detail::put_timeline_row(begin + size_, row) - begin);
  ++rows_;
  if (size_ >= detail::kCsvFlushBytes) {
    os_.write(begin, static_cast<std::streamsize>(size_));
    size_ = 0;
  }
}

void TimelineCsvWriter::finish() {
  if (finished_) return;
  finished_ = true;
  if (size_ > 0) os_.write(buf_.get(), static_cast<std::streamsize>(size_));
  size_ = 0;
}

void write_timeline_csv(std::ostream& os, std::span<const TimelineRow> rows) {
  TimelineCsvWriter writer(os);
  for (const TimelineRow& r : rows) writer.add(r);
  writer.finish();
}

void write_requests_csv(std::ostream& os, std::span<const RequestRecord> records) {
  os << detail::kRequestsCsvHeader << "\n";
  fmt::memory_buffer buf;
  for (const RequestRecord& r : records) {
    const std::string_view reason = r.rejected ? to_string(r.reject_reason) : std::string_view();
    detail::end_row(buf, detail::put_request_row(detail::begin_row(buf), r, reason));
    detail::flush_csv(os, buf);
  }
  detail::flush_csv(os, buf, /*force=*/true);
}

}  // namespace kvsim
