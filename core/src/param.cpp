#include "kvsim/core/param.h"

namespace kvsim {
namespace {

// Start and end of a marker; inside it, the id, then optionally a separator and the value.
constexpr char kBegin = '\x1e';
constexpr char kEnd = '\x1f';
constexpr char kValue = '\x1d';  // id, then the value text as typed
constexpr char kFlag = '\x1c';   // id, then '1' (on) or '0' (off)

std::string dashed(std::string_view id) {
  std::string out = "--";
  for (char c : id) out += c == '_' ? '-' : c;
  return out;
}

std::string spell_one(std::string_view body, ParamSpelling spelling) {
  const size_t sep = body.find_first_of(std::string_view("\x1d\x1c", 2));
  const std::string_view id = body.substr(0, sep);
  if (sep == std::string_view::npos) {
    switch (spelling) {
      case ParamSpelling::kCli:
        return dashed(id);
      case ParamSpelling::kPython:
        return std::string(id) + "=";
      case ParamSpelling::kNeutral:
        return std::string(id);
    }
  }
  const std::string_view rest = body.substr(sep + 1);
  if (body[sep] == kFlag) {
    const bool on = rest == "1";
    if (spelling == ParamSpelling::kCli) {
      return on ? dashed(id) : "--no-" + dashed(id).substr(2);
    }
    return std::string(id) + (on ? "=True" : "=False");
  }
  if (spelling == ParamSpelling::kCli) return dashed(id) + " " + std::string(rest);
  return std::string(id) + "=" + std::string(rest);
}

}  // namespace

std::string param(std::string_view id) {
  std::string out(1, kBegin);
  out += id;
  out += kEnd;
  return out;
}

std::string param(std::string_view id, std::string_view value) {
  std::string out(1, kBegin);
  out += id;
  out += kValue;
  out += value;
  out += kEnd;
  return out;
}

std::string param_flag(std::string_view id, bool on) {
  std::string out(1, kBegin);
  out += id;
  out += kFlag;
  out += on ? '1' : '0';
  out += kEnd;
  return out;
}

std::string spell_params(std::string_view message, ParamSpelling spelling) {
  std::string out;
  out.reserve(message.size());
  size_t at = 0;
  while (at < message.size()) {
    const size_t begin = message.find(kBegin, at);
    const size_t end = begin == std::string_view::npos ? begin : message.find(kEnd, begin + 1);
    if (end == std::string_view::npos) {
      out += message.substr(at);
      break;
    }
    out += message.substr(at, begin - at);
    out += spell_one(message.substr(begin + 1, end - begin - 1), spelling);
    at = end + 1;
  }
  return out;
}

}  // namespace kvsim
