// spillway: the command-line tool. Subcommands live in tools/cmd_*.cc.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/cli_util.h"
#include "tools/command.h"
#include "tools/help_format.h"

namespace spillway::cli {
namespace {
std::vector<Registrar>& Registry() {
  static std::vector<Registrar> r;
  return r;
}

std::string CommandList(const CLI::App& app) {
  std::string s;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (!s.empty()) s += ", ";
    s += sub->get_name();
  }
  return s;
}

// What CLI11 would say only as "A subcommand is required": the first word is
// checked here, so `spillway frobnicate` and `spillway --verbose` are named.
// Returns -1 to go on parsing, else the exit status.
int CheckFirstWord(CLI::App& app, int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "%s\nspillway: a command is required (one of: %s)\n", app.help().c_str(),
                 CommandList(app).c_str());
    return 2;
  }
  const std::string first = argv[1];
  if (first == "help") {
    if (argc >= 3) {
      CLI::App* sub = nullptr;
      try {
        sub = app.get_subcommand(argv[2]);
      } catch (const CLI::OptionNotFound&) {
      }
      if (!sub) {
        std::fprintf(stderr, "spillway help: unknown command '%s' (commands: %s)\n", argv[2], CommandList(app).c_str());
        return 2;
      }
      std::printf("%s", sub->help(app.get_name()).c_str());  // "Usage: spillway validate ..."
      return 0;
    }
    std::printf("%s", app.help().c_str());
    return 0;
  }
  if (first == "-h" || first == "--help" || first == "--version") return -1;
  if (first.rfind("-", 0) == 0) {
    std::fprintf(stderr, "spillway: unknown option '%s' (usage: spillway COMMAND [OPTIONS]; commands: %s)\n",
                 first.c_str(), CommandList(app).c_str());
    return 2;
  }
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->check_name(first)) return -1;
  }
  std::fprintf(stderr, "spillway: unknown command '%s' (commands: %s; `spillway help COMMAND` for one)\n",
               first.c_str(), CommandList(app).c_str());
  return 2;
}
}  // namespace

RegisterCommand::RegisterCommand(Registrar r) { Registry().push_back(r); }

}  // namespace spillway::cli

int main(int argc, char** argv) {
  CLI::App app{"spillway: a tiered storage engine for GPU, host memory and disks"};
  // Usage lines name the program, not argv[0]'s path; set before the
  // subcommands are added, which copy the formatter.
  app.name("spillway");
  spillway::cli::UseHelpFormatter(app);
  app.require_subcommand(1);
  app.set_version_flag("--version", spillway::cli::VersionLine());
  int exit_code = 0;
  for (auto r : spillway::cli::Registry()) r(app, exit_code);
  if (int rc = spillway::cli::CheckFirstWord(app, argc, argv); rc >= 0) return rc;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // usage errors exit 2
  }
  return exit_code;
}
