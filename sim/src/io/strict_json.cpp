#include "kvsim/sim/io/strict_json.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <vector>

#include <fmt/core.h>

namespace kvsim {
namespace {

using json = nlohmann::json;

// A char iterator that publishes how far the parser has read, so that SAX events (which carry
// no position) can be placed on a line. nlohmann's lexer reads one character at a time through
// it; when key() is called it has just read the key's closing quote.
class TrackingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackingIterator(const char* p, const char** shared) : p_(p), shared_(shared) {}
  reference operator*() const { return *p_; }
  TrackingIterator& operator++() {
    ++p_;
    *shared_ = p_;
    return *this;
  }
  TrackingIterator operator++(int) {
    TrackingIterator old = *this;
    ++*this;
    return old;
  }
  bool operator==(const TrackingIterator& o) const { return p_ == o.p_; }
  bool operator!=(const TrackingIterator& o) const { return p_ != o.p_; }

 private:
  const char* p_;
  const char** shared_;
};

// nlohmann's DOM builder plus a set of keys per open object.
class StrictHandler {
 public:
  explicit StrictHandler(json& root) : dom_(root, /*allow_exceptions=*/false) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return dom_.number_float(v, s);
  }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    keys_.emplace_back();
    return dom_.start_object(n);
  }
  bool end_object() {
    keys_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return dom_.start_array(n); }
  bool end_array() { return dom_.end_array(); }
  bool key(json::string_t& k) {
    if (!keys_.back().insert(k).second) {
      duplicate_ = k;
      return false;
    }
    return dom_.key(k);
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
    std::string msg = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 9: ..." -> "column 9: ...";
    // the line is given separately.
    if (const size_t at = msg.find("column "); at != std::string::npos) {
      msg = msg.substr(at);
    } else if (const size_t close = msg.find("] "); close != std::string::npos) {
      msg = msg.substr(close + 2);
    }
    error_ = msg;
    return false;
  }

  const std::string& duplicate() const { return duplicate_; }
  const std::string& error() const { return error_; }

 private:
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<std::set<std::string>> keys_;
  std::string duplicate_;
  std::string error_;
};

int64_t line_at(std::string_view text, size_t offset, int64_t first_line) {
  offset = std::min(offset, text.size());
  return first_line +
         std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
}

}  // namespace

JsonInputError::JsonInputError(const std::string& source, int64_t line, const std::string& problem)
    : std::runtime_error(fmt::format("{}:{}: {}", source, line, problem)),
      line_(line),
      problem_(problem) {}

json parse_strict_json(std::string_view text, const std::string& source, int64_t first_line) {
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    throw JsonInputError(
        source, line_at(text, nul, first_line),
        fmt::format("NUL byte at offset {} (a JSON text never contains one)", nul));
  }
  json root;
  StrictHandler handler(root);
  const char* read_to = text.data();
  const TrackingIterator first(text.data(), &read_to);
  const TrackingIterator last(text.data() + text.size(), &read_to);
  const bool ok = json::sax_parse(first, last, &handler);
  const size_t offset = static_cast<size_t>(read_to - text.data());
  if (!handler.duplicate().empty()) {
    throw JsonInputError(source, line_at(text, offset, first_line),
                         fmt::format("key \"{}\" given twice in one object", handler.duplicate()));
  }
  if (!ok) {
    throw JsonInputError(source, line_at(text, offset == 0 ? 0 : offset - 1, first_line),
                         "malformed JSON: " + handler.error());
  }
  return root;
}

}  // namespace kvsim
