// spillway: the command-line tool. Subcommands live in tools/cmd_*.cc.
#include <cstdio>
#include <vector>

#include "tools/command.h"

namespace spillway::cli {
namespace {
std::vector<Registrar>& Registry() {
  static std::vector<Registrar> r;
  return r;
}
}  // namespace

RegisterCommand::RegisterCommand(Registrar r) { Registry().push_back(r); }

}  // namespace spillway::cli

int main(int argc, char** argv) {
  CLI::App app{"spillway: a tiered storage engine for GPU, host memory and disks"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "spillway 0.1.0");
  int exit_code = 0;
  for (auto r : spillway::cli::Registry()) r(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // usage errors exit 2
  }
  return exit_code;
}
