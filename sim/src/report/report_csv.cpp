// Timeline and per-request CSV writers.
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <iterator>
#include <memory>
#include <mutex>
#include <ostream>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

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

namespace {

enum class FieldKind : uint8_t { kInt, kSeconds, kStop };

template <FieldKind kKind>
uint32_t format_field(char* text, int64_t v) {
  char* end = text;
  if constexpr (kKind == FieldKind::kInt) {
    end = put_int(text, v);
  } else if constexpr (kKind == FieldKind::kSeconds) {
    end = put_seconds(text, v);
  } else {
    end = put_text(text, to_string(static_cast<AdmissionStop>(v)));
  }
  return static_cast<uint32_t>(end - text);
}

// A group's text from its values: "," before each column's formatting.
template <FieldKind... kKinds, size_t N>
uint32_t format_group(char* text, const int64_t (&v)[N]) {
  static_assert(sizeof...(kKinds) == N);
  char* t = text;
  size_t i = 0;
  ((*t++ = ',', t += format_field<kKinds>(t, v[i++])), ...);
  return static_cast<uint32_t>(t - text);
}

}  // namespace

TimelineRowFormatter::TimelineRowFormatter()
    : column_field_{&step_,      &time_,      &duration_,  nullptr, &blocks_[0],
                    &blocks_[1], &blocks_[2], &blocks_[3], nullptr} {
  step_.len = format_field<FieldKind::kInt>(step_.text, 0);
  time_.len = format_field<FieldKind::kSeconds>(time_.text, 0);
  duration_.len = format_field<FieldKind::kSeconds>(duration_.text, 0);
  for (Field& f : blocks_) f.len = format_field<FieldKind::kInt>(f.text, 0);
  counts_.len = format_group<FieldKind::kInt, FieldKind::kInt, FieldKind::kInt, FieldKind::kInt,
                             FieldKind::kInt, FieldKind::kInt>(counts_.text, counts_.values);
  tail_.len = format_group<FieldKind::kInt, FieldKind::kStop, FieldKind::kInt, FieldKind::kInt,
                           FieldKind::kInt>(tail_.text, tail_.values);
}

namespace {

// n bytes (n <= kFieldTextBytes) from s to d: two fixed-size copies that overlap, so no
// call and no loop (the branches follow a column's length, which rarely changes).
inline void copy_field_text(char* d, const char* s, uint32_t n) {
  static_assert(kFieldTextBytes <= 32);
  if (n >= 16) {
    std::memcpy(d, s, 16);
    std::memcpy(d + n - 16, s + n - 16, 16);
  } else if (n >= 8) {
    std::memcpy(d, s, 8);
    std::memcpy(d + n - 8, s + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(d, s, 4);
    std::memcpy(d + n - 4, s + n - 4, 4);
  } else if (n > 0) {  // a time of -1 (never) is empty text
    d[0] = s[0];
    d[n / 2] = s[n / 2];
    d[n - 1] = s[n - 1];
  }
}

}  // namespace

// The step: usually the last one + 1, a decimal increment of its text.
[[gnu::always_inline]] inline void TimelineRowFormatter::update_step(Changes& c, int64_t step) {
  if (step == step_.value) return;
  const uint32_t before = step_.len;
  if (step_.value >= 0 && step_.value < INT64_MAX && step == step_.value + 1) {
    char* const t = step_.text;
    int64_t i = static_cast<int64_t>(step_.len) - 1;
    while (i >= 0 && t[i] == '9') t[i--] = '0';
    if (i >= 0) {
      ++t[i];
    } else {  // 9..9 -> 10..0
      std::memmove(t + 1, t, step_.len);
      t[0] = '1';
      ++step_.len;
    }
  } else {
    step_.len = format_field<FieldKind::kInt>(step_.text, step);
  }
  step_.value = step;
  c.changed |= 1u << 0;
  c.same_lengths &= step_.len == before;
}

namespace {
// A single column: reformatted only when its value changed.
template <FieldKind kKind>
inline void update_column(TimelineRowFormatter::Changes& c, TimelineRowFormatter::Field& field,
                          int64_t v, uint32_t column) {
  if (v == field.value) return;
  const uint32_t before = field.len;
  field.value = v;
  field.len = format_field<kKind>(field.text, v);
  c.changed |= 1u << column;
  c.same_lengths &= field.len == before;
}
}  // namespace

[[gnu::always_inline]] inline char* TimelineRowFormatter::emit(char* p, Changes c) {
  const uint32_t changed = c.changed;
  if (c.same_lengths && row_len_ > 0) {
    // The last row with the changed columns written over theirs, then copied out whole (p has
    // kMaxCsvRow of room).
    for (uint32_t bits = changed; bits != 0; bits &= bits - 1) {
      const auto k = static_cast<size_t>(std::countr_zero(bits));
      const Field& f = *column_field_[k];
      copy_field_text(row_ + offset_[k], f.text, f.len);
    }
    std::memcpy(p, row_, kRowCopyBytes);
    return p + row_len_;
  }

  // Column by column, noting where each starts.
  char* const begin = p;
  auto put = [&p, begin, this](const Field& field, size_t column) {
    offset_[column] = static_cast<uint32_t>(p - begin);
    std::memcpy(p, field.text, kFieldTextBytes);
    p += field.len;
  };
  auto put_group = [&p, begin, this]<size_t N>(const Group<N>& g, size_t column) {
    offset_[column] = static_cast<uint32_t>(p - begin);
    if (g.len <= 32) {
      std::memcpy(p, g.text, 32);
    } else {
      std::memcpy(p, g.text, kGroupTextBytes);
    }
    p += g.len;
  };
  put(step_, 0);
  *p++ = ',';
  put(time_, 1);
  *p++ = ',';
  put(duration_, 2);
  put_group(counts_, 3);
  for (size_t k = 0; k < 4; ++k) {
    *p++ = ',';
    put(blocks_[k], 4 + k);
  }
  put_group(tail_, 8);
  *p++ = '\n';
  const auto len = static_cast<size_t>(p - begin);
  if (len <= kRowCopyBytes) {
    std::memcpy(row_, begin, kRowCopyBytes);
    row_len_ = static_cast<uint32_t>(len);
  } else {
    row_len_ = 0;
  }
  return p;
}

char* TimelineRowFormatter::put(char* p, const TimelineRow& r) {
  // Each column's text first, noting which changed and whether every change kept its length.
  Changes c;
  update_step(c, r.step);
  // A group: one comparison of all its values, its text reformatted only when one changed.
  auto update_group = [&]<size_t N>(Group<N>& g, const int64_t(&v)[N], auto reformat,
                                    uint32_t column) {
    if (std::memcmp(v, g.values, sizeof v) == 0) return;
    std::memcpy(g.values, v, sizeof v);
    g.len = reformat(g.text, g.values);
    c.changed |= 1u << column;
    c.same_lengths = false;  // a group's text is never patched in place
  };
  update_column<FieldKind::kSeconds>(c, time_, r.time_ns, 1);
  update_column<FieldKind::kSeconds>(c, duration_, r.duration_ns, 2);
  const int64_t counts[] = {r.running,          r.waiting,        r.scheduled_reqs,
                            r.scheduled_tokens, r.prefill_tokens, r.decode_tokens};
  update_group(
      counts_, counts,
      [](char* t, const int64_t(&v)[6]) {
        return format_group<FieldKind::kInt, FieldKind::kInt, FieldKind::kInt, FieldKind::kInt,
                            FieldKind::kInt, FieldKind::kInt>(t, v);
      },
      3);
  update_column<FieldKind::kInt>(c, blocks_[0], r.used_blocks, 4);
  update_column<FieldKind::kInt>(c, blocks_[1], r.free_blocks, 5);
  update_column<FieldKind::kInt>(c, blocks_[2], r.cached_blocks, 6);
  update_column<FieldKind::kInt>(c, blocks_[3], r.padding_tokens, 7);
  const int64_t tail[] = {r.preemptions, static_cast<int64_t>(r.admission_stop), r.swap_out_blocks,
                          r.swap_in_blocks, r.host_slots_used};
  update_group(
      tail_, tail,
      [](char* t, const int64_t(&v)[5]) {
        return format_group<FieldKind::kInt, FieldKind::kStop, FieldKind::kInt, FieldKind::kInt,
                            FieldKind::kInt>(t, v);
      },
      8);
  return emit(p, c);
}

char* TimelineRowFormatter::put_successor(char* p, const TimelineStepDelta& d) {
  Changes c;
  update_step(c, step_.value + 1);
  update_column<FieldKind::kSeconds>(c, time_, d.time_ns, 1);
  update_column<FieldKind::kSeconds>(c, duration_, d.duration_ns, 2);
  update_column<FieldKind::kInt>(c, blocks_[0], d.used_blocks, 4);
  update_column<FieldKind::kInt>(c, blocks_[1], d.free_blocks, 5);
  update_column<FieldKind::kInt>(c, blocks_[2], d.cached_blocks, 6);
  update_column<FieldKind::kInt>(c, blocks_[3], d.padding_tokens, 7);
  return emit(p, c);
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

namespace {

// Room for n T's that nothing writes before the caller: T is an implicit-lifetime aggregate, so
// the storage operator new returns holds its objects from the start (C++20 [intro.object]) and
// the sink's stores give them their values. make_unique_for_overwrite would still run T's member
// initialisers and so touch all 2.9 MB of the chunks up front, where a replay's rows touch only
// the part they fill (issue 27: a --timeline replay of Azure conv took 1505 page faults with the
// chunks initialised, 917 without, and 1.5 ms less CPU; bench/RESULTS.md, eighteenth pass).
template <class T>
struct RawArrayDelete {
  void operator()(T* p) const { ::operator delete(p); }
};
template <class T>
using RawArray = std::unique_ptr<T[], RawArrayDelete<T>>;
template <class T>
RawArray<T> allocate_uninitialized(size_t n) {
  static_assert(std::is_aggregate_v<T> && std::is_trivially_copyable_v<T> &&
                std::is_trivially_destructible_v<T>);
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  return RawArray<T>(static_cast<T*>(::operator new(n * sizeof(T))));
}

}  // namespace

// The second thread of kBackground: a queue of full chunks, spare chunks for reuse, and the
// first exception the thread met. A chunk is kRowsPerChunk entries and as many rows, allocated
// once and not initialised; the caller fills the one handed out (TimelineSink's room: an entry a
// row, and the row itself unless it is a successor) and hands it back full, and the thread reads
// only what was filled.
class TimelineCsvWriter::Background {
 public:
  explicit Background(TimelineCsvWriter& w) : writer_(w) {
    for (size_t i = 0; i < kChunksInFlight + 1; ++i) {
      spare_.push_back(Chunk{allocate_uninitialized<TimelineStepDelta>(kRowsPerChunk),
                             allocate_uninitialized<TimelineRow>(kRowsPerChunk), 0});
    }
    filling_ = std::move(spare_.back());
    spare_.pop_back();
    thread_ = std::thread([this] { run(); });
    place_thread();
  }
  ~Background() { stop(/*drain=*/false); }

  // The chunk being filled: kRowsPerChunk entries and rows from here.
  TimelineStepDelta* entries() const { return filling_.entries.get(); }
  TimelineRow* rows() const { return filling_.rows.get(); }
  // Hands the chunk being filled over with its first `n` entries (none: keeps it) and takes the
  // next one (rows()); waits while kChunksInFlight chunks are queued. Rethrows the thread's
  // exception, handing nothing over.
  void hand_over(size_t n) {
    std::unique_lock lock(mutex_);
    if (error_) std::rethrow_exception(error_);
    if (n == 0) return;  // nothing to hand over: the chunk stays
    filling_.size = n;
    full_.push_back(std::move(filling_));
    // No wake-up while the thread polls: it looks for full chunks every kPoll (run()). Waking
    // it here was a futex call and an interrupt to the other CPU per chunk on this thread, the
    // replay's. A thread that stopped polling (no chunk for kPollsBeforeSleep polls) sleeps
    // until woken.
    if (asleep_) cv_.notify_all();
    // Back-pressure: wait for a spare chunk (the thread returns one per chunk written).
    if (spare_.empty()) {
      producer_waits_ = true;
      cv_.notify_all();  // the thread may be in its wait: this one is the replay's to pay
      cv_.wait(lock, [this] { return !spare_.empty() || error_; });
      producer_waits_ = false;
    }
    if (error_) std::rethrow_exception(error_);
    filling_ = std::move(spare_.back());
    spare_.pop_back();
  }
  // Writes every row handed over and the first `n` entries' of the chunk being filled, then
  // stops the thread.
  void finish(size_t n) {
    if (n > 0) {
      std::lock_guard lock(mutex_);
      if (!error_) {
        filling_.size = n;
        full_.push_back(std::move(filling_));
      }
    }
    stop(/*drain=*/true);
    rethrow();
  }
  void rethrow() {
    std::lock_guard lock(mutex_);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  struct Chunk {
    RawArray<TimelineStepDelta> entries;
    RawArray<TimelineRow> rows;  // the whole rows, in the order of their markers
    size_t size = 0;             // entries filled
  };
  // Names the thread (kThreadName) and keeps it off the CPU this thread runs on now, where
  // another is allowed: left to the kernel, the writer, woken once a chunk, was often placed on
  // the replay's CPU and preempted it there (40-66 involuntary switches and 5-13 ms of wall time
  // lost in a 40 ms sync replay on a 2-core VM; 3-7 switches and 0.1-0.6 ms with this; issue 27,
  // bench/RESULTS.md tenth pass). The replay's thread is not pinned: it stays free to move. Both
  // are hints; a failure changes nothing else.
  void place_thread() {
#if defined(__linux__)
    const pthread_t t = thread_.native_handle();
    (void)pthread_setname_np(t, kThreadName);
    const int here = sched_getcpu();
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (here < 0 || here >= CPU_SETSIZE || sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
      return;
    }
    CPU_CLR(here, &allowed);
    if (CPU_COUNT(&allowed) > 0) (void)pthread_setaffinity_np(t, sizeof allowed, &allowed);
#endif
  }
  void stop(bool drain) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
      drain_ = drain;
    }
    cv_.notify_all();
    thread_.join();
  }
  void run() {
    std::unique_lock lock(mutex_);
    while (true) {
      // Polls: the replay's thread hands chunks over without waking this one (hand_over), so
      // that it makes no system call per chunk; stop() and a waiting replay do wake it. After
      // kPollsBeforeSleep polls without a chunk (a replay slower than rows come in a fast one,
      // or one between calls) it sleeps instead, and the next chunk wakes it.
      for (int polls = 0; full_.empty() && !stopping_; ++polls) {
        if (polls < kPollsBeforeSleep) {
          cv_.wait_for(lock, kPoll);
        } else {
          asleep_ = true;
          cv_.wait(lock, [this] { return !full_.empty() || stopping_; });
          asleep_ = false;
        }
      }
      if (full_.empty() || (stopping_ && !drain_)) return;  // stopped and drained, or dropped
      Chunk chunk = std::move(full_.front());
      full_.pop_front();
      lock.unlock();
      try {
        TimelineCsvWriter& writer = writer_;  // read once, not from this object every row
        const TimelineStepDelta* const entries = chunk.entries.get();
        const TimelineRow* row = chunk.rows.get();
        for (size_t i = 0; i < chunk.size; ++i) {
          if (entries[i].used_blocks == TimelineSink::kWholeRowMarker) {
            writer.format(*row++);
          } else {
            writer.format_successor(entries[i]);
          }
        }
      } catch (...) {
        lock.lock();
        error_ = std::current_exception();
        full_.clear();
        cv_.notify_all();
        return;
      }
      lock.lock();
      spare_.push_back(std::move(chunk));
      if (producer_waits_) cv_.notify_all();
    }
  }

  // How often the thread looks for full chunks: the replay fills one (kRowsPerChunk quiet
  // steps) in about 0.3 ms on the issue-27 run, so the thread, faster, is seldom a chunk behind;
  // each look is a timer wake-up on its own CPU.
  static constexpr std::chrono::microseconds kPoll{100};
  static constexpr int kPollsBeforeSleep = 20;  // 2 ms

  TimelineCsvWriter& writer_;
  Chunk filling_;
  alignas(64) std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Chunk> full_;
  std::vector<Chunk> spare_;
  std::exception_ptr error_;
  bool stopping_ = false;
  bool drain_ = false;
  bool producer_waits_ = false;  // hand_over() waits for a spare chunk
  bool asleep_ = false;          // run() waits for a chunk without polling
  std::thread thread_;
};

TimelineCsvWriter::TimelineCsvWriter(std::ostream& os, Mode mode)
    : buf_(new char[detail::kCsvFlushBytes + detail::kMaxCsvRow]),
      os_(os),
      formatter_(std::make_unique<detail::TimelineRowFormatter>()) {
  os_ << detail::kTimelineCsvHeader << "\n";
  if (mode == Mode::kBackground) {
    background_ = std::make_unique<Background>(*this);
    entry_next_ = background_->entries();
    entry_end_ = entry_next_ + kRowsPerChunk;
    next_ = background_->rows();
  }
}

// The thread stops (dropping what it has not written) before the buffer it writes goes.
TimelineCsvWriter::~TimelineCsvWriter() {
  background_.reset();
}

void TimelineCsvWriter::format(const TimelineRow& row) {
  char* const begin = buf_.get();
  size_ = static_cast<size_t>(formatter_->put(begin + size_, row) - begin);
  if (size_ >= detail::kCsvFlushBytes) write_buffered();
}

void TimelineCsvWriter::format_successor(const TimelineStepDelta& d) {
  char* const begin = buf_.get();
  size_ = static_cast<size_t>(formatter_->put_successor(begin + size_, d) - begin);
  if (size_ >= detail::kCsvFlushBytes) write_buffered();
}

void TimelineCsvWriter::write_buffered() {
  if (size_ > 0) os_.write(buf_.get(), static_cast<std::streamsize>(size_));
  size_ = 0;
}

size_t TimelineCsvWriter::entries_filled() const {
  return entry_next_ == nullptr ? size_t{0}
                                : static_cast<size_t>(entry_next_ - background_->entries());
}

void TimelineCsvWriter::take_room() {
  // The chunk is full, or the thread failed before (no room was left then: hand_over
  // rethrows, handing nothing over).
  const size_t filled = entries_filled();
  entry_next_ = entry_end_ =
      nullptr;  // until a chunk is taken: a failure leaves every row to add()
  next_ = nullptr;
  background_->hand_over(filled);
  rows_ += static_cast<int64_t>(filled);
  entry_next_ = background_->entries();
  entry_end_ = entry_next_ + kRowsPerChunk;
  next_ = background_->rows();
}

void TimelineCsvWriter::add(const TimelineRow& row) {
  if (finished_) throw std::logic_error("TimelineCsvWriter: add() after finish()");
  if (!background_) {
    ++rows_;
    format(row);
    return;
  }
  if (entry_next_ == entry_end_) take_room();
  put(row);
}

int64_t TimelineCsvWriter::rows() const {
  return rows_ + static_cast<int64_t>(background_ ? entries_filled() : 0);
}

void TimelineCsvWriter::finish() {
  if (finished_) return;
  finished_ = true;
  if (background_) {
    const size_t filled = entries_filled();
    entry_next_ = entry_end_ = nullptr;  // add() after finish() throws
    next_ = nullptr;
    rows_ += static_cast<int64_t>(filled);
    background_->finish(filled);
  }
  write_buffered();
}

void write_timeline_csv(std::ostream& os, std::span<const TimelineRow> rows) {
  TimelineCsvWriter writer(os);
  for (const TimelineRow& r : rows) writer.add(r);
  writer.finish();
}

RequestsCsvWriter::RequestsCsvWriter(std::ostream& os) : os_(os) {
  os_ << detail::kRequestsCsvHeader << "\n";
}

void RequestsCsvWriter::add(const RequestRecord& r) {
  if (finished_) throw std::logic_error("RequestsCsvWriter: add() after finish()");
  const std::string_view reason = r.rejected ? to_string(r.reject_reason) : std::string_view();
  detail::end_row(buf_, detail::put_request_row(detail::begin_row(buf_), r, reason));
  detail::flush_csv(os_, buf_);
  ++rows_;
}

void RequestsCsvWriter::finish() {
  if (finished_) return;
  finished_ = true;
  detail::flush_csv(os_, buf_, /*force=*/true);
}

void write_requests_csv(std::ostream& os, std::span<const RequestRecord> records) {
  RequestsCsvWriter w(os);
  for (const RequestRecord& r : records) w.add(r);
  w.finish();
}

}  // namespace kvsim
