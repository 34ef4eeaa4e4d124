// `spillway bench`: every tier boundary against its physical limit and against
// the peers, in one run. Prints a table with the ratio of each
// figure to a reference measured in the same run and whether its target was
// met, writes <machine>-<date>.{md,json,png} to --out, and exits 0 when every
// figure was measured (missed targets are results, not failures), 1 when a
// figure could not be measured, 2 on a usage error. docs/bench.md describes
// each section; bench/harness/ implements them (one file per section).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>

#include "config/fs_probe.h"
#include "spillway/build_revision.h"
#include "bench/harness/common.h"
#include "tools/cli_util.h"
#include "tools/command.h"

namespace spillway::cli {
namespace {

using bench::Options;

// The folder holding bench/zict_peer.py: the source tree (the working
// directory or an ancestor of the executable) or <prefix>/share/spillway.
std::string FindSourceDir() {
  const std::string peer = FindDataFile("bench/zict_peer.py");
  if (peer.empty()) return "";
  return std::filesystem::path(peer).parent_path().parent_path().string();
}

std::string CommandLine(const Options& o) {
  std::string c = "spillway bench";
  if (o.quick) c += " --quick";
  if (o.json) c += " --json";
  if (o.out != ".") c += " --out " + o.out;
  if (o.dir != "/var/tmp/spillway-bench") c += " --dir " + o.dir;
  if (!o.machine.empty()) c += " --machine " + o.machine;
  if (o.sections != "1,2,3,4,5,6") c += " --sections " + o.sections;
  if (o.reps) c += " --reps " + std::to_string(o.reps);
  return c;
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  return static_cast<bool>(f);
}

int Run(const Options& o) {
  if (!o.memory_probe.empty()) return bench::RunMemoryProbe(o.memory_probe);
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(o.dir, ec);
  if (ec) {
    std::fprintf(stderr, "spillway bench: cannot create --dir %s: %s\n", o.dir.c_str(), ec.message().c_str());
    return 2;
  }
  fs::create_directories(o.out, ec);
  if (ec) {
    std::fprintf(stderr, "spillway bench: cannot create --out %s: %s\n", o.out.c_str(), ec.message().c_str());
    return 2;
  }
  bench::Report rep;
  rep.quick = o.quick;
  rep.machine = o.machine.empty() ? bench::MachineName() : o.machine;
  const std::time_t now = std::time(nullptr);
  char date[32], stamp[64];
  std::strftime(date, sizeof(date), "%Y-%m-%d", std::localtime(&now));
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S %Z", std::localtime(&now));
  rep.date = date;
  rep.started_at = stamp;
  rep.command = CommandLine(o);
  rep.details["machine_description"] = bench::MachineDescription();
  rep.details["scratch"] = o.dir;
  // Named as validate and info name it (stat -f says "ext2/ext3" for ext4).
  rep.details["scratch_fs"] = FilesystemTypeName(o.dir);
  rep.details["reps"] = o.Reps();
  rep.details["loadavg_start"] = bench::LoadAverage();
  int rc = 0;

  // What the binary was built from; and the checkout it runs in, where that
  // is another revision (a binary carried to another machine, or a tree
  // changed since the build).
  rep.details["source_revision"] = SPILLWAY_BUILD_REVISION;
  const std::string source_dir = FindSourceDir();
  if (!source_dir.empty()) {
    std::string rev = bench::RunCapture("git -C " + bench::ShellQuote(source_dir) +
                                            " describe --always --dirty --abbrev=12 2>/dev/null",
                                        &rc);
    while (!rev.empty() && (rev.back() == '\n' || rev.back() == ' ')) rev.pop_back();
    if (rc == 0 && rev != SPILLWAY_BUILD_REVISION) rep.details["checkout_revision"] = rev;
  }
  double weight = 0;
  for (auto [s, w] : {std::pair{1, 0.3}, {2, 0.25}, {3, 0.2}, {4, 0.15}, {6, 0.01}}) weight += o.Runs(s) || (s == 1 && o.Runs(5)) ? w : 0;
  bench::Progress progress(weight);
  const double t0 = bench::Now();
  // Incompressible object contents for every section; larger than any cache
  // and than two of the largest objects.
  const bench::DataPool pool(192 * bench::kMiB);
  bench::Context ctx{o, rep, progress, pool, source_dir};
  auto timed = [&](const char* name, void (*section)(bench::Context&)) {
    const double t = bench::Now();
    section(ctx);
    rep.details["section_seconds"][name] = bench::Now() - t;
  };
  if (o.Runs(1) || o.Runs(5)) timed("1+5", bench::RunSpillSection);
  if (o.Runs(2)) timed("2", bench::RunCodecSection);
  if (o.Runs(3)) timed("3", bench::RunSmallSection);
  if (o.Runs(4)) timed("4", bench::RunScalingSection);
  if (o.Runs(6)) timed("6", bench::RunGpuSection);
  progress.Finish();
  rep.details["seconds"] = bench::Now() - t0;
  rep.details["loadavg_end"] = bench::LoadAverage();
  rep.details["cpu_seconds"] = bench::ProcessCpuSeconds();
  // Section 5's rows are produced inside section 1's loop: list them in order.
  std::stable_sort(rep.rows.begin(), rep.rows.end(),
                   [](const bench::Row& a, const bench::Row& b) { return a.section < b.section; });
  if (!o.Runs(1)) {
    std::erase_if(rep.rows, [](const bench::Row& r) { return r.section == 1; });
  }

  const std::string base = (fs::path(o.out) / (rep.machine + "-" + rep.date)).string();
  std::string plot_note;
  if (o.plots) {
    plot_note = bench::DrawPlots(rep, base + ".png");
    if (plot_note.empty()) rep.details["png"] = fs::path(base + ".png").filename().string();
    else rep.Note("Plots: " + plot_note);
  }
  const std::string md = bench::FormatMarkdown(rep);
  nlohmann::json j = bench::ToJson(rep);
  int unmeasured = 0;
  for (const bench::Row& r : rep.rows) unmeasured += r.Verdict() == "NOT MEASURED";
  // The verdict of every --json output (docs/cli.md): missed targets are
  // results; a figure not measured is not.
  j["ok"] = unmeasured == 0;
  bool ok = WriteFile(base + ".md", md);
  ok = WriteFile(base + ".json", j.dump(2) + "\n") && ok;
  if (!ok) j["ok"] = false;
  if (o.json) std::printf("%s\n", j.dump().c_str());
  else std::printf("%s", bench::FormatTable(rep).c_str());
  std::fprintf(stderr, "spillway bench: wrote %s.md, %s.json%s (%.0f s)\n", base.c_str(), base.c_str(),
               plot_note.empty() && o.plots ? (", " + base + ".png").c_str() : "", bench::Now() - t0);
  if (!plot_note.empty()) std::fprintf(stderr, "spillway bench: %s\n", plot_note.c_str());
  if (!ok) {
    std::fprintf(stderr, "spillway bench: cannot write the results to %s\n", o.out.c_str());
    return 1;
  }
  for (const bench::Row& r : rep.rows) {
    if (r.Verdict() == "NOT MEASURED") {
      std::fprintf(stderr, "spillway bench: not measured: %s: %s\n", r.id.c_str(), r.note.c_str());
    }
  }
  return unmeasured ? 1 : 0;
}

void Register(CLI::App& root, int& exit_code) {
  auto o = std::make_shared<Options>();
  auto* cmd = root.add_subcommand(
      "bench", "Measure every tier boundary against fio, the zstd/lz4 CLIs and a Dask-style spiller (docs/bench.md)");
  cmd->add_flag("--quick", o->quick, "Smaller data and one repetition (CI: under 3 minutes)");
  cmd->add_flag("--json", o->json, "Print the JSON document instead of the table");
  cmd->add_option("--out", o->out, "Directory for <machine>-<date>.{md,json,png} (default: the current directory)");
  cmd->add_option("--dir", o->dir, "Scratch directory for the file tier, fio and the peer")->capture_default_str();
  cmd->add_option("--machine", o->machine, "Machine name for the result files (default: the host name)");
  cmd->add_option("--sections", o->sections, "Comma-separated sections to run (1-6)")->capture_default_str()->check(IntList(1, 6));
  cmd->add_option("--reps", o->reps, "Repetitions per figure (default 3, quick 1)")->transform(WholeNumber(1, 20));
  cmd->add_option("--python", o->python, "Python for the zict.File peer")->capture_default_str();
  cmd->add_flag("--plots,!--no-plots", o->plots, "Draw the PNG with gnuplot (default on)");
  cmd->add_option("--memory-probe", o->memory_probe, "internal: N1,N2")->group("");
  // Placeholders in --help (tools/help_format.h): what the value is.
  cmd->get_option("--out")->type_name("DIR");
  cmd->get_option("--dir")->type_name("DIR");
  cmd->get_option("--machine")->type_name("NAME");
  cmd->get_option("--python")->type_name("PATH");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

const RegisterCommand kReg(Register);

}  // namespace
}  // namespace spillway::cli
