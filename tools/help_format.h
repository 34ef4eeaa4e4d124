// The help text of `spillway` and every subcommand: options show what their
// value is (FILE, SIZE, N, MIN:MAX), not CLI11's C++ type (TEXT, UINT,
// FLOAT), and flags with a negation show no "{false}".
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace spillway::cli {

// Placeholders, in order of preference: the option's type_name where a
// command set one (or a validator named one, like SizeArg's SIZE); else N
// for a whole number, X for a real one (also what the numeric validators
// call themselves), and for text the option's name in
// capitals (--profile PROFILE), as Python's argparse shows it. A
// CLI::Range shows as "(lo-hi)" after a number's placeholder. Positional
// arguments show their name in capitals: FILE, DIR.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override;
  std::string make_option_opts(const CLI::Option* opt) const override;
};

// Installs HelpFormatter on `app`; subcommands added afterwards inherit it.
void UseHelpFormatter(CLI::App& app);

}  // namespace spillway::cli
