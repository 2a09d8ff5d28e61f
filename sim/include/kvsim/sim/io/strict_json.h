// One strict JSON parser for every JSON input kvsim reads whole (HF config.json, the header of a
// kvsim trace, format detection). nlohmann-json on its own takes the last value of a repeated
// key and treats a NUL byte as the end of the input (ignoring what follows); here both are
// errors, as is anything but whitespace after the value.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kvsim {

// A JSON text that is malformed or not strict. what() is one line "SOURCE:LINE: problem";
// line() is 1-based (counting from `first_line`).
class JsonInputError : public std::runtime_error {
 public:
  JsonInputError(const std::string& source, int64_t line, const std::string& problem);
  int64_t line() const { return line_; }
  const std::string& problem() const { return problem_; }

 private:
  int64_t line_;
  std::string problem_;
};

// Parses `text` as exactly one JSON value. Refuses (JsonInputError) a NUL byte anywhere, a key
// given twice in one object (at any depth), malformed JSON and trailing non-whitespace, naming
// `source` and the line (text's first line is `first_line`). Numbers keep nlohmann's types.
nlohmann::json parse_strict_json(std::string_view text, const std::string& source,
                                 int64_t first_line = 1);

}  // namespace kvsim
