// The one CSV line splitter, shared by the trace readers and `sweep --merge`.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kvsim::csv {

// Splits one CSV line (no line break inside) into fields, RFC 4180 quoting. The rules:
//  - a field that starts with '"' is quoted: it runs to the next lone '"', "" inside it is one
//    literal quote, and the closing quote must be followed by ',' or the end of the line
//    (otherwise: "text after a closing quote");
//  - a '"' anywhere else in a field is a stray quote and an error (RFC 4180 forbids it; taking it
//    literally would hide a broken quoted field that swallowed a comma);
//  - a quoted field left open at the end of the line is an error ("unterminated quote").
// Fields are not trimmed. An empty line is one empty field.
//
// The splitter owns its buffers: fields() views either the line passed to split() or the
// splitter's own unquoted copies, and stays valid until the next split() or the line's end of
// life. Reusing one splitter per file keeps splitting allocation-free after the first lines.
class Splitter {
 public:
  // Returns "" on success, else the problem prefixed by the 1-based column
  // ("column 3: unterminated quote"); fields() then holds the columns before it.
  std::string split(std::string_view line);
  const std::vector<std::string_view>& fields() const { return fields_; }

 private:
  std::vector<std::string_view> fields_;
  std::string unquoted_;  // quoted fields' contents, back to back; reserved so views stay valid
};

// Quotes `s` for a CSV field when it holds ',', '"', '\n' or '\r' (doubling inner quotes).
std::string quote_field(std::string_view s);

}  // namespace kvsim::csv
