// Usage errors (docs/design.md §4, docs/errors.md "Usage errors"): a bad command line exits with 2 and one
// line that names the option and shows a valid command, before any work. Every subcommand carries an
// example (shown under its --help too), and number options check their values here, so that nothing
// like a NaN temperature or a negative count reaches the code behind them.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace loco::cli {

// The command line shown under `cmd`'s --help and after its usage errors.
void set_example(CLI::App* cmd, const std::string& example);

// Prints "loco: error: WHAT; for example: EXAMPLE" (the example of the deepest subcommand `app`
// parsed) and returns the exit code of usage errors, 2.
int report_usage_error(CLI::App& app, const CLI::ParseError& error);

// Gives every number option of `app` and its subcommands (CLI11's types INT, UINT, FLOAT) a check that the value
// is written in decimal: CLI11 2.1.2 reads integers with strtoll's base 0 (010 is 8, 0x10 is 16), wraps -1 into
// an unsigned option, saturates a number beyond 64 bits and takes an empty value as 0, and reads floats with
// strtold (hexadecimal, inf, nan), while loco's own checks read decimal: one text meant two numbers.
void require_decimal_numbers(CLI::App& app);

// Validators whose messages say what the value must be, in words: "-5 is not a whole number ≥ 1".
CLI::Validator whole_number_at_least(std::int64_t minimum);
CLI::Validator number_in(double low, double high);  // finite, low ≤ value ≤ high
CLI::Validator positive_number();                   // finite, > 0
CLI::Validator non_negative_number();               // finite, ≥ 0
CLI::Validator finite_number();
// A TCP port, 0 to 65535 (0: any free one). A larger number is refused, never taken modulo 65536.
CLI::Validator tcp_port();
// A path that is not empty: '' (an unset shell variable) is named as the option's mistake, not left to the
// file system ("cannot use '': Invalid argument").
CLI::Validator path_given();
CLI::Validator text_given();  // any text but the empty one (an address, a run's id)

}  // namespace loco::cli
