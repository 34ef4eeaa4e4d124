// `spillway version`: prints the version and what this build supports; the
// same line as `spillway --version`.
#include <cstdio>

#include "tools/cli_util.h"
#include "tools/command.h"

namespace spillway::cli {
namespace {
void Register(CLI::App& root, int& exit_code) {
  auto* cmd = root.add_subcommand("version", "Print the version and build features");
  cmd->callback([&exit_code] {
    std::printf("%s\n", VersionLine().c_str());
    exit_code = 0;
  });
}
const RegisterCommand kReg(Register);
}  // namespace
}  // namespace spillway::cli
