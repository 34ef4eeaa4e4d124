// `spillway version`: prints the version and what this build supports.
#include <cstdio>

#include "tools/command.h"

namespace spillway::cli {
namespace {
void Register(CLI::App& root, int& exit_code) {
  auto* cmd = root.add_subcommand("version", "Print the version and build features");
  cmd->callback([&exit_code] {
#ifdef SPILLWAY_HAVE_CUDA
    std::printf("spillway 0.1.0 (CUDA: yes)\n");
#else
    std::printf("spillway 0.1.0 (CUDA: no)\n");
#endif
    exit_code = 0;
  });
}
const RegisterCommand kReg(Register);
}  // namespace
}  // namespace spillway::cli
