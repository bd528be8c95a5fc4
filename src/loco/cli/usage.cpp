#include "loco/cli/usage.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <charconv>
#include <map>
#include <regex>

#include "loco/util/parse_number.h"
#include "loco/util/print_unchecked.h"

namespace loco::cli {

namespace {

std::map<const CLI::App*, std::string>& examples() {
  static std::map<const CLI::App*, std::string> by_command;
  return by_command;
}

// A number rule: the value parses as a finite number and `accepts` it; otherwise "TEXT is not RULE".
CLI::Validator number_rule(const std::string& rule, std::function<bool(double)> accepts) {
  return CLI::Validator(
      [rule, accepts](std::string& text) -> std::string {
        const auto value = parse_whole_number(text);
        if (value && accepts(*value)) return "";
        return fmt::format("{} is not {}", text, rule);
      },
      rule);
}

// "" when `text` is a whole number in plain decimal that fits 64 bits (signed, or unsigned for `is_unsigned`), or
// else what is wrong with it.
std::string decimal_integer_problem(const std::string& text, bool is_unsigned) {
  if (text.empty()) return "the value is empty; give a number";
  // A minus sign (where the option takes one) and digits, nothing else: no '+', which loco's own checks refuse.
  const std::size_t digits = text[0] == '-' ? 1 : 0;
  if (text.size() == digits || text.find_first_not_of("0123456789", digits) != std::string::npos) {
    return fmt::format("{} is not a whole number written in decimal digits", text);
  }
  if (text.size() > digits + 1 && text[digits] == '0') {
    return fmt::format("{} begins with 0, which CLI tools read as octal; write the number without leading zeros", text);
  }
  if (is_unsigned && digits == 1) {
    return fmt::format("{} is negative, and this option takes whole numbers from 0", text);
  }
  const char* end = text.data() + text.size();
  std::errc error{};
  if (is_unsigned) {
    std::uint64_t value = 0;
    error = std::from_chars(text.data(), end, value).ec;
  } else {
    std::int64_t value = 0;
    error = std::from_chars(text.data(), end, value).ec;
  }
  return error == std::errc() ? "" : fmt::format("{} is beyond the numbers 64 bits hold", text);
}

}  // namespace

void require_decimal_numbers(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    const bool is_unsigned = type.rfind("UINT", 0) == 0;
    const bool is_integer = is_unsigned || type.rfind("INT", 0) == 0;
    if (!is_integer && type.rfind("FLOAT", 0) != 0) continue;
    option->check(CLI::Validator(
        [is_integer, is_unsigned](std::string& text) -> std::string {
          if (is_integer) return decimal_integer_problem(text, is_unsigned);
          if (text.empty()) return "the value is empty; give a number";
          const bool blank_first = std::isspace(static_cast<unsigned char>(text.front())) != 0;
          return !blank_first && parse_whole_number(text) ? ""
                                                          : fmt::format("{} is not a finite number in decimal", text);
        },
        ""));
  }
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; })) require_decimal_numbers(*command);
}

void set_example(CLI::App* cmd, const std::string& example) {
  examples()[cmd] = example;
  cmd->footer("Example: " + example);
}

int report_usage_error(CLI::App& app, const CLI::ParseError& error) {
  std::string what = error.what();
  // CLI11 says "--prompt: At Most 1 required but received 2" of an option given twice.
  static const std::regex twice("^(\\S+): At Most 1 required but received (\\d+)$");
  if (std::smatch m; std::regex_match(what, m, twice)) {
    what = fmt::format("{} was given {} times; it takes one value, so give it once", m[1].str(), m[2].str());
  }
  // CLI11 says "Could not convert: --layers = 99999999999" of a number beyond the option's type.
  static const std::regex unconverted("^Could not convert: (\\S+) = (.*)$");
  if (std::smatch m; std::regex_match(what, m, unconverted)) {
    what = fmt::format(
        "{} {} is not a value it takes: a number beyond the range of its type (give a smaller one), "
        "or not a number",
        m[1].str(), m[2].str());
  }
  // CLI11 says "--count requires --config" of an option that refines another (CLI::Option::needs).
  static const std::regex requires_other("^(\\S+) requires (\\S+)$");
  if (std::smatch m; std::regex_match(what, m, requires_other)) {
    what = fmt::format("{0} is read only with {1}: give {1} too, or drop {0}", m[1].str(), m[2].str());
  }
  // CLI11 says "--events excludes --json" of two options that contradict each other (CLI::Option::excludes).
  static const std::regex excludes_other("^(\\S+) excludes (\\S+)$");
  if (std::smatch m; std::regex_match(what, m, excludes_other)) {
    what = fmt::format("{} and {} do not go together (one makes the other meaningless): give one of them", m[1].str(),
                       m[2].str());
  }
  const CLI::App* command = &app;
  while (!command->get_subcommands().empty()) command = command->get_subcommands().front();
  std::string path;  // "bench allreduce"
  for (const CLI::App* c = command; c != &app && c != nullptr; c = c->get_parent()) {
    path = path.empty() ? c->get_name() : c->get_name() + " " + path;
  }
  // CLI11 lists the words it did not expect last first ("were not expected: c b a"): in the order given.
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
    std::vector<std::string> extra = command->remaining();
    if (extra.empty()) extra = app.remaining();
    if (!extra.empty()) {
      what = fmt::format(
          "{} {} not expected: loco{} takes no words outside its options (a value that holds spaces "
          "needs quotes)",
          fmt::join(extra, " "), extra.size() == 1 ? "was" : "were", path.empty() ? "" : " " + path);
    }
  }
  std::vector<std::string> commands;  // what the deepest command parsed has below it (loco's, bench's)
  for (const CLI::App* c : command->get_subcommands([](const CLI::App*) { return true; })) {
    commands.push_back(c->get_name());
  }
  if (!commands.empty() && !command->remaining().empty()) {
    // CLI11 says only that a subcommand is required; name the word it did not know.
    what = fmt::format("'{}' is not a loco{} command; the commands are {}", command->remaining().front(),
                       path.empty() ? "" : " " + path, fmt::join(commands, ", "));
  }
  const auto example = examples().find(command);  // a command without one shows the top level's
  const std::string shown = example != examples().end() ? example->second : examples()[&app];
  const std::string help = path.empty() ? "loco --help" : fmt::format("loco {} --help", path);
  loco::print_unchecked(stderr, "loco: error: {}; for example: {} (all options: {})\n", what, shown, help);
  return 2;
}

CLI::Validator whole_number_at_least(std::int64_t minimum) {
  const std::string rule = fmt::format("a whole number ≥ {}", minimum);
  return CLI::Validator(
      [rule, minimum](std::string& text) -> std::string {
        // Unsigned first, so that a uint64 option (a seed) takes its whole range.
        const char* end = text.data() + text.size();
        std::uint64_t positive = 0;
        const auto [stop, error] = std::from_chars(text.data(), end, positive);
        if (!text.empty() && error == std::errc() && stop == end) {
          if (minimum <= 0 || positive >= static_cast<std::uint64_t>(minimum)) return "";
        } else {
          std::int64_t value = 0;
          const auto [signed_stop, signed_error] = std::from_chars(text.data(), end, value);
          if (!text.empty() && signed_error == std::errc() && signed_stop == end && value >= minimum) return "";
        }
        return fmt::format("{} is not {}", text, rule);
      },
      rule);
}

CLI::Validator number_in(double low, double high) {
  return number_rule(fmt::format("a number from {} to {}", low, high), [=](double v) { return v >= low && v <= high; });
}

CLI::Validator positive_number() {
  return number_rule("a positive number", [](double v) { return v > 0; });
}

CLI::Validator non_negative_number() {
  return number_rule("a number ≥ 0", [](double v) { return v >= 0; });
}

CLI::Validator finite_number() {
  return number_rule("a finite number", [](double) { return true; });
}

CLI::Validator text_given() {
  return CLI::Validator(
      [](std::string& text) -> std::string { return text.empty() ? "the value is empty; give one" : ""; }, "TEXT");
}

CLI::Validator path_given() {
  return CLI::Validator(
      [](std::string& text) -> std::string { return text.empty() ? "the path is empty; give one" : ""; }, "PATH");
}

CLI::Validator tcp_port() {
  const std::string rule = "a TCP port from 0 to 65535 (0 picks a free one)";
  return CLI::Validator(
      [rule](std::string& text) -> std::string {
        const char* end = text.data() + text.size();
        int port = -1;
        const auto [stop, error] = std::from_chars(text.data(), end, port);
        const bool valid = !text.empty() && error == std::errc() && stop == end && port >= 0 && port <= 65535;
        return valid ? "" : fmt::format("{} is not {}", text, rule);
      },
      rule);
}

}  // namespace loco::cli
