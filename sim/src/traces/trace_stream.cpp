// TraceStream: read_trace()'s normalisation (trace_read.cpp) done one row at a time, for a trace
// whose arrivals keep file order; the requests of a small trace are held after the validation
// pass, a large one is read again. The steps and their order follow read_trace exactly: sort
// (a no-op here), rebase on the first arrival, window and rebase on the first arrival in it,
// file order (a no-op), max_requests, synthetic arrivals, time scale. Errors read_trace raises
// after parsing the whole file are deferred to the end of the validation pass, in read_trace's
// order, so that both raise the same one.
#include "kvsim/sim/traces/trace_stream.h"

#include <algorithm>
#include <climits>
#include <exception>
#include <stdexcept>
#include <utility>

#include <fmt/core.h>

#include "kvsim/sim/traces/trace_random.h"
#include "trace_readers.h"

namespace kvsim {

class TraceStream::Normaliser {
 public:
  Normaliser(const TraceReadOptions& options, const Trace& header, bool has_arrivals)
      : options_(options),
        header_(header),
        has_arrivals_(has_arrivals),
        windowed_(options.start_s > 0 || options.duration_s > 0),
        start_ns_(detail::seconds_to_ns(options.start_s, "start")),
        duration_ns_(detail::seconds_to_ns(options.duration_s, "duration")) {
    if (header.arrival_mode == ArrivalMode::POISSON) poisson_.emplace(options.rate, options.seed);
  }

  // Whether the arrivals seen so far keep file order (else the trace must be read whole).
  bool in_file_order() const { return in_order_; }
  // True once no later row can be kept (past the window or max_requests).
  bool done() const { return done_; }

  // Turns a parsed row (file order) into the request read_trace keeps, setting its arrival;
  // false when it is not kept. Errors are kept (first of each kind) for rethrow_deferred().
  bool take(TraceRequest& r) {
    const int64_t raw_ns = r.arrival_ns;
    if (has_arrivals_) {
      if (seen_any_ && r.arrival_ns < last_raw_ns_) in_order_ = false;
      last_raw_ns_ = r.arrival_ns;
      if (!seen_any_) base_ns_ = r.arrival_ns;
      seen_any_ = true;
      if (!in_order_ || rebase_error_) return false;
      if (auto error = detail::rebase_arrival(r.arrival_ns, base_ns_, r.source_line, header_.path,
                                              header_.format)) {
        rebase_error_ = std::make_exception_ptr(*error);
        return false;
      }
      if (windowed_) {
        if (r.arrival_ns < start_ns_) return false;
        if (duration_ns_ > 0 && r.arrival_ns >= start_ns_ + duration_ns_) {
          done_ = true;  // arrivals do not decrease: nothing later is in the window
          return false;
        }
        if (!window_base_ns_) window_base_ns_ = r.arrival_ns;
        r.arrival_ns -= *window_base_ns_;
      }
    }
    if (done_) return false;
    if (options_.max_requests > 0 && kept_ >= options_.max_requests) {
      done_ = true;
      return false;
    }
    if (kept_++ == 0 && has_arrivals_) first_kept_raw_ns_ = raw_ns;
    if (header_.arrival_mode == ArrivalMode::ALL_AT_ONCE) {
      r.arrival_ns = 0;
    } else if (header_.arrival_mode == ArrivalMode::POISSON) {
      if (poisson_error_) return true;
      try {
        r.arrival_ns = poisson_->next();
      } catch (const std::exception&) {
        poisson_error_ = std::current_exception();
        return true;
      }
    }
    if (!scale_error_) {
      try {
        r.arrival_ns = detail::scale_arrival(r.arrival_ns, options_.time_scale, r.source_line);
      } catch (const std::exception&) {
        scale_error_ = std::current_exception();
      }
    }
    return true;
  }

  // The file's own arrival of the first request kept (read_trace's base + window offset): the
  // absolute time of t = 0 for a trace of absolute datetimes; unset when none was kept.
  std::optional<int64_t> first_kept_raw_ns() const { return first_kept_raw_ns_; }

  // read_trace's post-parse errors, in its order: rebase, Poisson arrivals, time scale.
  void rethrow_deferred() const {
    for (const std::exception_ptr& e : {rebase_error_, poisson_error_, scale_error_}) {
      if (e) std::rethrow_exception(e);
    }
  }

 private:
  const TraceReadOptions& options_;
  const Trace& header_;
  bool has_arrivals_;
  bool windowed_;
  int64_t start_ns_;
  int64_t duration_ns_;
  bool seen_any_ = false;
  bool in_order_ = true;
  bool done_ = false;
  int64_t last_raw_ns_ = 0;
  int64_t base_ns_ = 0;
  std::optional<int64_t> window_base_ns_;
  int64_t kept_ = 0;
  std::optional<int64_t> first_kept_raw_ns_;
  std::optional<PoissonArrivals> poisson_;
  std::exception_ptr rebase_error_;
  std::exception_ptr poisson_error_;
  std::exception_ptr scale_error_;
};

namespace {

// Thrown through the layout readers to end the replay pass once every request was handed out.
struct StopReading {};

// What a held request costs: itself and what it owns (kMaxHeldBytes counts this).
int64_t held_bytes(const TraceRequest& r) {
  int64_t bytes = sizeof(TraceRequest) + static_cast<int64_t>(r.session_id.size());
  if (r.hash_ids) bytes += static_cast<int64_t>(r.hash_ids->size() * sizeof(uint64_t));
  if (r.prompt_token_ids) {
    bytes += static_cast<int64_t>(r.prompt_token_ids->size() * sizeof(int32_t));
  }
  return bytes;
}

}  // namespace

std::optional<TraceStream> TraceStream::open(const std::string& path,
                                             const TraceReadOptions& options,
                                             int64_t max_held_bytes) {
  detail::validate_read_options(options);
  TraceStream s;
  s.options_ = options;
  detail::RowSink sink(s.header_, s.options_);
  // The layout (which says whether rows carry arrivals) is known only once reading starts, and
  // whether that turns TRACE into ALL_AT_ONCE only at the end; so rows are normalised under the
  // mode the options ask for, as if they had arrivals. That keeps exactly the rows read_trace
  // keeps, with the same errors: rows of a layout without arrivals all arrive at 0, which
  // neither sorts, rebases nor scales, and a window on them is refused after the parse. Only
  // their final arrivals could differ (TRACE vs ALL_AT_ONCE: 0 either way); for_each uses the
  // resolved mode. That is why the requests kept here can be held: their arrivals are the
  // resolved mode's too.
  bool any_requests = false;
  bool any_hash_ids = false;
  // Requests kept so far, while they fit in max_held_bytes; dropped (the trace streams) beyond.
  std::vector<std::vector<HeldRequest>> held;
  std::vector<TraceRequest> held_extras;
  bool holding = max_held_bytes > 0;
  int64_t bytes = 0;
  Trace provisional;
  provisional.path = path;
  provisional.arrival_mode = options.arrival;
  std::optional<Normaliser> norm;
  sink.on_request = [&](TraceRequest&& r) {
    any_requests = true;
    any_hash_ids = any_hash_ids || r.hash_ids != nullptr;
    if (!norm) {
      provisional.format = s.header_.format;
      norm.emplace(s.options_, provisional, /*has_arrivals=*/true);
    }
    // Out of file order: read_trace must sort the whole trace; stop here, the caller reads it
    // whole (and gets every error from that read).
    if (!norm->take(r)) {
      if (!norm->in_file_order()) throw StopReading{};
      return;
    }
    s.num_requests_ += 1;
    const int64_t length = int64_t{r.input_tokens} + r.output_tokens;
    if (length + 1 > INT32_MAX && s.too_long_line_ == 0) {
      s.too_long_line_ = r.source_line;
      s.too_long_input_ = r.input_tokens;
      s.too_long_output_ = r.output_tokens;
    }
    s.longest_ = std::max(s.longest_, length);
    if (holding) {
      bytes += held_bytes(r);
      if (bytes <= max_held_bytes) {
        if (held.empty() || held.back().size() == held.back().capacity()) {
          // Chunks of 256 requests, doubling up to 16,384 (512 KiB of HeldRequest).
          const size_t chunks = held.size();
          held.emplace_back().reserve(chunks < 6 ? size_t{256} << chunks : 16384);
        }
        HeldRequest& h = held.back().emplace_back();
        h.arrival_ns = r.arrival_ns;
        h.source_line = r.source_line;
        h.input_tokens = r.input_tokens;
        h.output_tokens = r.output_tokens;
        h.priority = r.priority;
        if (r.hash_ids || r.prompt_token_ids || !r.session_id.empty() || r.hash_block_size != 0) {
          h.extra = static_cast<int32_t>(held_extras.size());
          held_extras.push_back(std::move(r));
        }
      } else {
        holding = false;
        held = {};
        held_extras = {};
      }
    }
  };
  try {
    s.has_arrivals_ = detail::read_rows(path, s.options_, s.header_, sink);
  } catch (const StopReading&) {
    return std::nullopt;
  }
  detail::resolve_arrival_mode(s.options_, s.has_arrivals_, any_requests, any_hash_ids, s.header_);
  if (norm) norm->rethrow_deferred();
  // Known after this first pass (the first request kept), as read_trace sets it.
  if (norm && s.header_.format == TraceFormat::AZURE &&
      s.header_.arrival_mode == ArrivalMode::TRACE) {
    s.header_.clock_start_unix_ns = norm->first_kept_raw_ns();
  }
  if (holding) {
    s.holds_ = true;
    s.held_ = std::move(held);
    s.held_extras_ = std::move(held_extras);
  }
  return s;
}

int32_t TraceStream::default_max_model_len() const {
  if (too_long_line_ != 0) {
    const TraceFieldNames names = trace_field_names(header_.format);
    const int64_t length = int64_t{too_long_input_} + too_long_output_;
    throw TraceError(header_.path, too_long_line_, fmt::format("{}+{}", names.input, names.output),
                     fmt::format("request of {} tokens; max_model_len (its length + 1) must fit "
                                 "in 2^31 - 1 tokens",
                                 length),
                     fmt::format("{}+{}", too_long_input_, too_long_output_));
  }
  return static_cast<int32_t>(longest_ + 1);
}

void TraceStream::for_each(const std::function<void(TraceRequest&&)>& fn) const {
  if (holds_) {
    // Copies: for_each is const and may run more than once.
    for (const std::vector<HeldRequest>& chunk : held_) {
      for (const HeldRequest& h : chunk) {
        TraceRequest r;
        if (h.extra >= 0) {
          r = held_extras_[static_cast<size_t>(h.extra)];
        } else {
          r.arrival_ns = h.arrival_ns;
          r.source_line = h.source_line;
          r.input_tokens = h.input_tokens;
          r.output_tokens = h.output_tokens;
          r.priority = h.priority;
        }
        fn(std::move(r));
      }
    }
    return;
  }
  Trace scratch;  // the second pass's counts (already known)
  detail::RowSink sink(scratch, options_);
  Normaliser norm(options_, header_, has_arrivals_);
  int64_t handed = 0;
  const auto changed = [this](const std::string& what) {
    return std::runtime_error(fmt::format(
        "{}: the trace changed while it was replayed ({}); replay it again", header_.path, what));
  };
  sink.on_request = [&](TraceRequest&& r) {
    if (!norm.take(r)) {
      if (!norm.in_file_order()) throw changed("arrivals out of order");
      if (norm.done() && handed == num_requests_) throw StopReading{};
      return;
    }
    if (handed == num_requests_) throw changed("more requests than before");
    ++handed;
    fn(std::move(r));
    if (handed == num_requests_ && options_.max_requests > 0) throw StopReading{};
  };
  try {
    detail::read_rows(header_.path, options_, scratch, sink);
  } catch (const StopReading&) {
    return;
  }
  if (handed != num_requests_) throw changed("fewer requests than before");
}

}  // namespace kvsim
