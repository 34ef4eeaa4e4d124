// Subcommand registration for the `spillway` tool: each tools/cmd_*.cc file
// defines one subcommand and registers it with a static RegisterCommand.
#pragma once

#include <CLI/CLI.hpp>

namespace spillway::cli {

// Adds a subcommand to `root`. The subcommand's callback stores the process
// exit status in `exit_code`: 0 the verdict is good, 1 it is bad, 2 a usage
// error or unusable input (docs/cli.md says which is which for each command).
using Registrar = void (*)(CLI::App& root, int& exit_code);

struct RegisterCommand {
  explicit RegisterCommand(Registrar r);
};

}  // namespace spillway::cli
