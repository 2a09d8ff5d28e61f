#include "validators.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "kvsim/sim/io/parse_number.h"

namespace kvsim::cli {
namespace {

// The text as a number, or nullopt-like false when it is not one (CLI11 reports those).
bool as_number(const std::string& s, long double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  v = std::strtold(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

CLI::Validator number_check(const char* description, bool (*ok)(long double),
                            const char* requirement) {
  return CLI::Validator(
      [ok, requirement](std::string& s) -> std::string {
        long double v = 0;
        if (!as_number(s, v)) return "";
        if (std::isnan(v) || !ok(v)) return fmt::format("must be {}, got {}", requirement, s);
        return "";
      },
      description);
}

}  // namespace

CLI::Validator positive() {
  return number_check(
      "> 0", [](long double v) { return v > 0; }, "> 0");
}
CLI::Validator non_negative() {
  return number_check(
      ">= 0", [](long double v) { return v >= 0; }, ">= 0");
}
CLI::Validator fraction_below_one() {
  return number_check(
      "in [0,1)", [](long double v) { return v >= 0 && v < 1; }, "in [0, 1)");
}

CLI::Validator one_of(std::span<const std::string_view> names) {
  return CLI::IsMember(std::vector<std::string>(names.begin(), names.end()));
}

uint64_t parse_u64(std::string_view flag, std::string_view text) {
  uint64_t v = 0;
  switch (parse_integer(text, v)) {
    case ParseStatus::kOk:
      return v;
    case ParseStatus::kOutOfRange:
      throw std::invalid_argument(
          fmt::format("{}: {} is out of range [0, 18446744073709551615]", flag, text));
    case ParseStatus::kNotNumber:
      break;
  }
  throw std::invalid_argument(fmt::format("{}: '{}' is not a non-negative integer", flag, text));
}

namespace {

CLI::Validator strict_value(std::string type) {
  return CLI::Validator(
      [type](std::string& s) -> std::string {
        if (s.empty()) return "empty value (give a value or leave the flag out)";
        if (type == "INT" || type == "UINT") {
          int64_t v = 0;
          switch (parse_integer(s, v)) {
            case ParseStatus::kOk:
              if (type == "UINT" && v < 0) return fmt::format("'{}' is negative", s);
              s = fmt::format("{}", v);  // canonical: CLI11's strtoll would read "010" as octal
              return "";
            case ParseStatus::kOutOfRange:
              return fmt::format("'{}' is out of range (at most 2^63 - 1)", s);
            case ParseStatus::kNotNumber:
              break;
          }
          return fmt::format("'{}' is not a decimal integer", s);
        }
        if (type == "FLOAT") {
          const std::string_view t = s.front() == '+' ? std::string_view(s).substr(1) : s;
          if (!parse_finite_double(t)) return fmt::format("'{}' is not a finite decimal number", s);
        }
        return "";
      },
      "", "strict value");
}

// The conversion type alone: CLI11 appends each validator's description ("INT:>= 0" for a flag
// with a range check), and a check on the full name let every range-checked flag skip the rule.
std::string base_type_name(const CLI::Option& opt) {
  const std::string full = opt.get_type_name();
  return full.substr(0, full.find(':'));
}

void apply_value_rules_to(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_size_max() == 0) continue;         // a flag: no value
    opt->transform(strict_value(base_type_name(*opt)));  // first, before the range checks
  }
  for (CLI::App* sub : app.get_subcommands({})) apply_value_rules_to(*sub);
}

}  // namespace

void apply_value_rules(CLI::App& app) {
  apply_value_rules_to(app);
}

std::vector<std::string> split_list(std::string_view flag, std::string_view text) {
  std::vector<std::string> items;
  size_t b = 0;
  while (true) {
    const size_t e = text.find(',', b);
    const std::string_view item = text.substr(b, e == std::string_view::npos ? e : e - b);
    if (item.empty()) {
      throw std::invalid_argument(
          text.empty() ? fmt::format("{}: empty list", flag)
                       : fmt::format("{}: item {} of '{}' is empty", flag, items.size() + 1, text));
    }
    items.emplace_back(item);
    if (e == std::string_view::npos) return items;
    b = e + 1;
  }
}

std::vector<int64_t> parse_int_list(std::string_view flag, std::string_view text) {
  std::vector<int64_t> out;
  for (const std::string& item : split_list(flag, text)) {
    int64_t v = 0;
    const ParseStatus status = parse_integer(item, v);
    if (status == ParseStatus::kOutOfRange) {
      throw std::invalid_argument(fmt::format("{}: {} is out of range (> 2^63 - 1)", flag, item));
    }
    if (status != ParseStatus::kOk) {
      throw std::invalid_argument(fmt::format("{}: '{}' is not an integer", flag, item));
    }
    if (v <= 0) throw std::invalid_argument(fmt::format("{}: must be > 0, got {}", flag, item));
    out.push_back(v);
  }
  return out;
}

std::vector<double> parse_double_list(std::string_view flag, std::string_view text) {
  std::vector<double> out;
  for (const std::string& item : split_list(flag, text)) {
    const std::optional<double> v = parse_finite_double(item);
    if (!v) throw std::invalid_argument(fmt::format("{}: '{}' is not a finite number", flag, item));
    out.push_back(*v);
  }
  return out;
}

}  // namespace kvsim::cli
