// JSON Lines layouts: Mooncake, Bailian and kvsim's own. Each line is parsed with nlohmann-json's
// SAX interface into a few named slots (no DOM), keeping the original text of numbers so that
// float seconds convert to nanoseconds exactly.
#include <algorithm>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "kvsim/core/param.h"
#include "kvsim/sim/io/strict_json.h"
#include "kvsim/sim/traces/trace_parse.h"
#include "trace_readers.h"

namespace kvsim::detail {
namespace {

using json = nlohmann::json;

// "[json.exception.parse_error.101] parse error at line 1, column 9: ..." -> "column 9: ...";
// "[json.exception.out_of_range.406] number overflow parsing '1e400'" -> "number overflow ...".
std::string json_error_text(const std::exception& ex) {
  std::string msg = ex.what();
  const size_t at = msg.find("column ");
  if (at != std::string::npos) return msg.substr(at);
  if (msg.starts_with("[json.exception.")) {
    const size_t close = msg.find("] ");
    if (close != std::string::npos) return msg.substr(close + 2);
  }
  return msg;
}

// One top-level value of the record.
struct Slot {
  enum Kind : uint8_t { ABSENT, INTEGER, FLOAT, STRING, BOOLEAN, NUL, ARRAY, OBJECT };
  Kind kind = ABSENT;
  std::string text;  // numbers: their JSON text; strings: the value
  // Arrays of non-negative integers (hash ids, token ids); array_ok is false if any element was
  // not one, with the offending element's text in bad_element.
  std::vector<uint64_t> array;
  bool array_ok = true;
  std::string bad_element;
};

// Fills the slots named in `names` from one JSON object; other keys are skipped whatever they
// hold.
class FlatObjectHandler : public nlohmann::json_sax<json> {
 public:
  explicit FlatObjectHandler(std::vector<std::string_view> names)
      : names_(std::move(names)), slots_(names_.size()) {}

  void reset() {
    for (auto& s : slots_) {
      s.kind = Slot::ABSENT;
      s.text.clear();
      s.array.clear();
      s.array_ok = true;
      s.bad_element.clear();
    }
    depth_ = 0;
    current_ = -1;
    error_.clear();
    not_object_ = false;
    seen_keys_.clear();
    duplicate_key_.clear();
  }
  const Slot& slot(size_t i) const { return slots_[i]; }
  const std::string& error() const { return error_; }
  // A top-level key given twice (the parse stops there); empty if none.
  const std::string& duplicate_key() const { return duplicate_key_; }
  bool not_object() const { return not_object_; }

  bool null() override { return scalar(Slot::NUL, "null"); }
  bool boolean(bool v) override { return scalar(Slot::BOOLEAN, v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override {
    if (in_array()) return element(v >= 0 ? std::optional<uint64_t>(v) : std::nullopt, v);
    return scalar(Slot::INTEGER, fmt::format("{}", v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (in_array()) return element(v, v);
    return scalar(Slot::INTEGER, fmt::format("{}", v));
  }
  bool number_float(number_float_t, const string_t& s) override {
    if (in_array()) return element(std::nullopt, s);
    return scalar(Slot::FLOAT, s);
  }
  bool string(string_t& v) override {
    if (in_array()) return element(std::nullopt, fmt::format("\"{}\"", v));
    return scalar(Slot::STRING, v);
  }
  bool binary(binary_t&) override { return scalar(Slot::NUL, "binary"); }
  bool start_object(std::size_t) override {
    if (depth_ == 0) {
      ++depth_;
      return true;
    }
    if (in_array()) element(std::nullopt, "{...}");
    if (depth_ == 1 && current_ >= 0) slots_[static_cast<size_t>(current_)].kind = Slot::OBJECT;
    ++depth_;
    return true;
  }
  bool end_object() override {
    --depth_;
    if (depth_ == 1) current_ = -1;
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth_ == 0) {
      not_object_ = true;
      return false;
    }
    if (in_array()) element(std::nullopt, "[...]");
    if (depth_ == 1 && current_ >= 0) slots_[static_cast<size_t>(current_)].kind = Slot::ARRAY;
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    if (depth_ == 1) current_ = -1;
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ != 1) return true;
    // A DOM parser would silently keep the last value of a repeated key: refuse it instead.
    if (std::find(seen_keys_.begin(), seen_keys_.end(), k) != seen_keys_.end()) {
      duplicate_key_ = k;
      return false;
    }
    seen_keys_.push_back(k);
    current_ = -1;
    for (size_t i = 0; i < names_.size(); ++i) {
      if (names_[i] == k) current_ = static_cast<int>(i);
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    error_ = json_error_text(ex);
    return false;
  }

 private:
  bool in_array() const {
    return depth_ == 2 && current_ >= 0 && slots_[cur()].kind == Slot::ARRAY;
  }
  size_t cur() const { return static_cast<size_t>(current_); }
  bool scalar(Slot::Kind kind, std::string text) {
    if (depth_ == 0) {
      not_object_ = true;
      return false;
    }
    if (depth_ == 1 && current_ >= 0) {
      slots_[cur()].kind = kind;
      slots_[cur()].text = std::move(text);
      current_ = -1;
    }
    return true;
  }
  template <typename T>
  bool element(std::optional<uint64_t> v, const T& text) {
    Slot& s = slots_[cur()];
    if (v) {
      s.array.push_back(*v);
    } else if (s.array_ok) {
      s.array_ok = false;
      s.bad_element = fmt::format("{}", text);
    }
    return true;
  }

  std::vector<std::string_view> names_;
  std::vector<Slot> slots_;
  int depth_ = 0;
  int current_ = -1;
  std::string error_;
  bool not_object_ = false;
  std::vector<std::string> seen_keys_;  // records have a handful of keys: a linear scan is fine
  std::string duplicate_key_;
};

// Slot indices per layout.
enum Field : size_t {
  ARRIVAL,
  INPUT,
  OUTPUT,
  HASH_IDS,
  HASH_BLOCK_SIZE,
  TOKEN_IDS,
  PRIORITY,
  SESSION
};

std::vector<std::string_view> field_names(TraceFormat format) {
  if (format == TraceFormat::KVSIM) {
    return {"arrival_s",       "input_tokens",     "output_tokens", "hash_ids",
            "hash_block_size", "prompt_token_ids", "priority",      "session_id"};
  }
  return {"timestamp", "input_length", "output_length", "hash_ids"};
}

class RecordParser {
 public:
  RecordParser(TraceFormat format, const std::string& path, const TraceReadOptions& options)
      : format_(format), path_(path), names_(field_names(format)), handler_(names_) {
    if (options.hash_block_size > 0) {
      default_block_size_ = options.hash_block_size;
      block_size_forced_ = true;
    } else if (format == TraceFormat::MOONCAKE) {
      default_block_size_ = 512;
    } else if (format == TraceFormat::BAILIAN) {
      default_block_size_ = 16;
    }
  }

  TraceRequest parse(std::string_view line, int64_t line_no, bool terminated) {
    line_ = line;
    line_no_ = line_no;
    // nlohmann's lexer takes a NUL for the end of the input: the rest of the line would be
    // ignored, a whole record included.
    if (const size_t nul = line.find('\0'); nul != std::string_view::npos) {
      fail("record", fmt::format("NUL byte at column {}", nul + 1), line);
    }
    handler_.reset();
    const bool ok = json::sax_parse(line.begin(), line.end(), &handler_);
    if (handler_.not_object()) fail("record", "not a JSON object", line);
    if (!handler_.duplicate_key().empty()) {
      fail(handler_.duplicate_key(), "key given twice in the record", line);
    }
    if (!ok) {
      fail("record",
           terminated ? fmt::format("malformed JSON: {}", handler_.error())
                      : fmt::format("truncated JSON at the end of the file: {}", handler_.error()),
           line);
    }
    TraceRequest r;
    r.source_line = line_no;
    const bool has_token_ids = present(TOKEN_IDS);
    r.output_tokens = tokens(OUTPUT);
    if (format_ == TraceFormat::KVSIM) {
      r.arrival_ns = seconds(ARRIVAL, 9);
      if (present(PRIORITY)) r.priority = integer(PRIORITY, std::numeric_limits<int32_t>::min());
      if (present(SESSION)) r.session_id = string(SESSION);
      if (has_token_ids) {
        auto ids = std::make_shared<std::vector<int32_t>>();
        for (const uint64_t v : array(TOKEN_IDS)) {
          if (v > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
            fail(name(TOKEN_IDS), "token id out of range", fmt::format("{}", v));
          }
          ids->push_back(static_cast<int32_t>(v));
        }
        r.input_tokens = present(INPUT) ? tokens(INPUT) : static_cast<int32_t>(ids->size());
        if (static_cast<size_t>(r.input_tokens) != ids->size()) {
          fail(name(INPUT), fmt::format("differs from the {} prompt_token_ids", ids->size()),
               slot(INPUT).text);
        }
        r.prompt_token_ids = std::move(ids);
      } else {
        r.input_tokens = tokens(INPUT);
      }
    } else {
      // Mooncake: integer milliseconds; Bailian: float seconds.
      r.arrival_ns = seconds(ARRIVAL, format_ == TraceFormat::MOONCAKE ? 6 : 9);
      r.input_tokens = tokens(INPUT);
    }
    if (present(HASH_IDS)) {
      if (has_token_ids) {
        fail(name(HASH_IDS), "give either hash_ids or prompt_token_ids, not both", "both");
      }
      int32_t bs = default_block_size_;
      if (format_ == TraceFormat::KVSIM && !block_size_forced_) {
        if (!present(HASH_BLOCK_SIZE)) {
          fail(name(HASH_BLOCK_SIZE), "missing (required with hash_ids)", line);
        }
        bs = integer(HASH_BLOCK_SIZE, 1);
      }
      auto ids = std::make_shared<std::vector<uint64_t>>(array(HASH_IDS));
      const int64_t expected = (int64_t{r.input_tokens} + bs - 1) / bs;
      if (static_cast<int64_t>(ids->size()) != expected) {
        fail(name(HASH_IDS),
             fmt::format("expected ceil({}/{}) = {} ids for a hash block size of {}",
                         r.input_tokens, bs, expected, bs),
             fmt::format("{} ids", ids->size()));
      }
      r.hash_ids = std::move(ids);
      r.hash_block_size = bs;
    }
    return r;
  }

 private:
  [[noreturn]] void fail(std::string_view field, std::string problem, std::string_view value) {
    throw TraceError(path_, line_no_, std::string(field), std::move(problem), value);
  }
  std::string_view name(Field f) const { return names_[f]; }
  const Slot& slot(Field f) const { return handler_.slot(f); }
  bool present(Field f) const {
    return f < names_.size() && slot(f).kind != Slot::ABSENT && slot(f).kind != Slot::NUL;
  }
  const Slot& require(Field f) {
    if (!present(f)) fail(name(f), "missing", line_);
    return slot(f);
  }
  int64_t integer(Field f, int64_t min) {
    const Slot& s = require(f);
    if (s.kind != Slot::INTEGER) fail(name(f), "not an integer", shown(s));
    const auto v = trace_parse::parse_int(s.text);
    if (!v || *v < min || *v > std::numeric_limits<int32_t>::max()) {
      fail(name(f), fmt::format("out of range [{}, {}]", min, std::numeric_limits<int32_t>::max()),
           s.text);
    }
    return *v;
  }
  int32_t tokens(Field f) {
    const Slot& s = require(f);
    if (s.kind != Slot::INTEGER) fail(name(f), "not an integer token count", shown(s));
    const auto v = trace_parse::parse_int(s.text);
    if (!v) fail(name(f), "not an integer token count", s.text);
    if (*v < 0) fail(name(f), "negative token count", s.text);
    if (*v > std::numeric_limits<int32_t>::max()) fail(name(f), "token count out of range", s.text);
    return static_cast<int32_t>(*v);
  }
  int64_t seconds(Field f, int scale) {
    const Slot& s = require(f);
    if (s.kind != Slot::INTEGER && s.kind != Slot::FLOAT) fail(name(f), "not a number", shown(s));
    const auto v = trace_parse::parse_decimal_scaled(s.text, scale);
    if (!v) fail(name(f), "time out of range", s.text);
    return *v;
  }
  std::string string(Field f) {
    const Slot& s = require(f);
    if (s.kind != Slot::STRING && s.kind != Slot::INTEGER) fail(name(f), "not a string", shown(s));
    return s.text;
  }
  const std::vector<uint64_t>& array(Field f) {
    const Slot& s = require(f);
    if (s.kind != Slot::ARRAY) fail(name(f), "not an array of integers", shown(s));
    if (!s.array_ok) fail(name(f), "element is not a non-negative integer", s.bad_element);
    return s.array;
  }
  static std::string shown(const Slot& s) {
    switch (s.kind) {
      case Slot::STRING:
        return fmt::format("\"{}\"", s.text);
      case Slot::ARRAY:
        return "[...]";
      case Slot::OBJECT:
        return "{...}";
      default:
        return s.text;
    }
  }

  TraceFormat format_;
  const std::string& path_;
  std::vector<std::string_view> names_;
  FlatObjectHandler handler_;
  int32_t default_block_size_ = 0;
  bool block_size_forced_ = false;
  std::string_view line_;
  int64_t line_no_ = 0;
};

}  // namespace

namespace {

json parse_first_record(std::string_view line, const std::string& path, int64_t line_number) {
  try {
    return parse_strict_json(line, path, line_number);
  } catch (const JsonInputError& e) {
    // The same words as for any other line (RecordParser), so the cause is visible.
    throw TraceError(path, line_number, "record", e.problem(), line);
  }
}

}  // namespace

TraceFormat detect_jsonl_format(std::string_view first_line, const std::string& path,
                                int64_t line_number) {
  const json j = parse_first_record(first_line, path, line_number);
  if (!j.is_object()) {
    throw TraceError(path, line_number, "record", "not a JSON object", first_line);
  }
  if (j.contains("kvsim_trace") || j.contains("input_tokens") || j.contains("arrival_s")) {
    return TraceFormat::KVSIM;
  }
  if (j.contains("input_length")) {
    // Mooncake and Bailian share their keys but not their clock (timestamp in milliseconds vs
    // seconds): a wrong guess reads arrivals 1000x off. Only what is certain decides: Bailian's
    // own keys (chat ids, turn) or Mooncake's layout (integer timestamp with hash_ids and no
    // Bailian key). Anything else stops and asks.
    if (j.contains("chat_id") || j.contains("parent_chat_id") || j.contains("turn")) {
      return TraceFormat::BAILIAN;
    }
    const auto ts = j.find("timestamp");
    if (ts != j.end() && ts->is_number_integer() && j.contains("hash_ids")) {
      return TraceFormat::MOONCAKE;
    }
    throw TraceError(path, line_number, "timestamp",
                     "cannot tell Mooncake (timestamp in ms) from Bailian (timestamp in s) by "
                     "this record; pass " +
                         param("format", "mooncake") + " or " + param("format", "bailian"),
                     first_line);
  }
  throw TraceError(path, line_number, "record",
                   "unknown JSONL layout (expected input_tokens (kvsim) or input_length "
                   "(Mooncake/Bailian); use " +
                       param("format") + ")",
                   first_line);
}

namespace {

// kvsim's header line ({"kvsim_trace": 1, "records": N}, trace_writer.h): the declared record
// count, or nullopt when `line` is not a header.
std::optional<int64_t> kvsim_header(std::string_view line, const std::string& path,
                                    int64_t line_number) {
  if (line.find("\"kvsim_trace\"") == std::string_view::npos) return std::nullopt;
  const json j = parse_first_record(line, path, line_number);
  if (!j.is_object() || !j.contains("kvsim_trace")) return std::nullopt;
  const auto fail = [&](const char* field, const char* problem) {
    throw TraceError(path, line_number, field, problem, line);
  };
  if (j.size() != 2 || !j.contains("records")) {
    fail("kvsim_trace", "the header holds exactly kvsim_trace and records");
  }
  if (!j["kvsim_trace"].is_number_integer() || j["kvsim_trace"].get<int64_t>() != 1) {
    fail("kvsim_trace", "unsupported version (this kvsim reads version 1)");
  }
  if (!j["records"].is_number_unsigned()) fail("records", "not a non-negative integer");
  const auto n = j["records"].get<uint64_t>();
  if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    fail("records", "out of range");
  }
  return static_cast<int64_t>(n);
}

}  // namespace

void read_jsonl_trace(LineReader& reader, TraceFormat format, RowSink& sink) {
  RecordParser parser(format, reader.path(), sink.options());
  std::string_view line;
  std::optional<int64_t> declared;  // the header's record count
  int64_t header_line = 0;
  int64_t records = 0;
  bool first = true;
  while (reader.next(line)) {
    if (trace_parse::trim(line).empty()) continue;
    if (first) {
      first = false;
      if (format == TraceFormat::KVSIM) {
        declared = kvsim_header(line, reader.path(), reader.line_number());
        if (declared) {
          header_line = reader.line_number();
          continue;
        }
      }
    }
    ++records;
    sink.count_row();
    try {
      sink.add(parser.parse(line, reader.line_number(), reader.last_line_terminated()));
    } catch (const TraceError& e) {
      sink.bad_row(e);
    }
  }
  // A file written by kvsim gen declares its length: fewer (or more) records mean a copy or a
  // write cut short, which must not pass for a short trace.
  if (declared && records != *declared) {
    throw TraceError(reader.path(), reader.line_number(), "records",
                     fmt::format("the header on line {} declares {} records and the file holds "
                                 "{}: cut short or damaged",
                                 header_line, *declared, records),
                     fmt::format("{} records", records));
  }
}

}  // namespace kvsim::detail
