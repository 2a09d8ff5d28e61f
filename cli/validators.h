// Short, exact messages for the numeric flag checks (CLI11's PositiveNumber / NonNegativeNumber
// print their range as a 310-digit number) and strict parsers for values CLI11 would coerce
// (a negative or overflowing uint64 seed) or split loosely (comma lists with empty items).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace kvsim::cli {

// Validators for add_option(...)->check(...). A value that is not a number passes the check and
// is reported by CLI11's own conversion error; NaN fails. Messages read "must be > 0, got 0"
// (CLI11 prefixes the flag name).
CLI::Validator positive();            // > 0
CLI::Validator non_negative();        // >= 0
CLI::Validator fraction_below_one();  // [0, 1)

// CLI::IsMember over the run room's list of accepted names (kvsim/run/parameters.h).
CLI::Validator one_of(std::span<const std::string_view> names);

// A decimal integer in [0, 2^64 - 1] (kvsim::parse_integer's grammar: an optional '+', no '-',
// no blanks, no overflow). Throws
// std::invalid_argument "FLAG: ..." naming the text.
uint64_t parse_u64(std::string_view flag, std::string_view text);

// The value rules every flag obeys, applied to every option of `app` and its subcommands that
// takes a value (call after all options are registered): an empty value is refused (it would
// otherwise mean "unset" and silently give the default); an integer option (CLI11 type INT or
// UINT) takes kvsim::parse_integer's grammar only (decimal; no hex or octal prefix, no overflow
// clamped to the type's limit) and the text is rewritten canonically before CLI11 converts it;
// a number option (FLOAT) takes parse_finite_double's grammar (no hex float, inf or nan).
// Messages quote the text as typed ("--max-model-len: '0x10' is not a decimal integer").
void apply_value_rules(CLI::App& app);

// Splits a comma-separated list; an empty list or an empty item is an error naming the item's
// position ("--block-sizes: item 1 of ',16' is empty").
std::vector<std::string> split_list(std::string_view flag, std::string_view text);

// split_list, then each item parsed strictly as a positive integer / a finite number.
std::vector<int64_t> parse_int_list(std::string_view flag, std::string_view text);
std::vector<double> parse_double_list(std::string_view flag, std::string_view text);

}  // namespace kvsim::cli
