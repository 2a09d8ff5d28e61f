#include "kvsim/sim/io/csv.h"

#include <cstring>

#include <fmt/core.h>

namespace kvsim::csv {

std::string Splitter::split(std::string_view line) {
  fields_.clear();
  // Most lines hold no quote: their fields are the text between commas, found with memchr
  // (vectorised), where the character loop below showed in the replay's profile. No error is
  // possible without a quote.
  if (line.empty()) {
    fields_.emplace_back();
    return {};
  }
  if (std::memchr(line.data(), '"', line.size()) == nullptr) {
    const char* p = line.data();
    const char* const end = p + line.size();
    while (true) {
      const auto* comma =
          p == end ? nullptr
                   : static_cast<const char*>(std::memchr(p, ',', static_cast<size_t>(end - p)));
      if (comma == nullptr) {
        fields_.emplace_back(p, static_cast<size_t>(end - p));
        return {};
      }
      fields_.emplace_back(p, static_cast<size_t>(comma - p));
      p = comma + 1;
    }
  }
  unquoted_.clear();
  // A quoted field's content is never longer than the line, so after this no append reallocates
  // and the views handed out below stay valid.
  unquoted_.reserve(line.size());
  const auto error = [&](const char* problem) {
    return fmt::format("column {}: {}", fields_.size() + 1, problem);
  };
  size_t i = 0;
  while (true) {
    if (i < line.size() && line[i] == '"') {
      const size_t begin = unquoted_.size();
      ++i;
      while (true) {
        if (i >= line.size()) return error("unterminated quote");
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            unquoted_.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        unquoted_.push_back(line[i++]);
      }
      if (i < line.size() && line[i] != ',') return error("text after a closing quote");
      fields_.emplace_back(std::string_view(unquoted_).substr(begin));
    } else {
      // A plain scan: find_first_of with a two-character set calls memchr over the set once per
      // character of the line (libstdc++), which showed in the replay's profile.
      size_t end = i;
      while (end < line.size() && line[end] != ',' && line[end] != '"') ++end;
      if (end < line.size() && line[end] == '"') return error("stray quote in an unquoted field");
      fields_.push_back(line.substr(i, end - i));
      i = end;
    }
    if (i >= line.size()) return {};
    ++i;  // the comma
  }
}

std::string quote_field(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
  std::string q = "\"";
  for (const char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + '"';
}

}  // namespace kvsim::csv
