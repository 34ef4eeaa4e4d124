// `spillway bench` output: the terminal table, the markdown report, the JSON
// document and the gnuplot PNG. Nothing here measures anything.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "bench/harness/common.h"

namespace spillway::bench {
namespace {

const char* SectionTitle(int s) {
  switch (s) {
    case 1: return "1. host -> file spilling and reading back (vs fio on the same directory)";
    case 2: return "2. codecs (vs the zstd / lz4 command-line benchmarks on the same bytes)";
    case 3: return "3. small objects in the host tier";
    case 4: return "4. scaling with object count and bytes";
    case 5: return "5. Dask-style peer (zict.File: one pickled file per key)";
    case 6: return "6. GPU";
  }
  return "?";
}

std::string Num(double v, int decimals) {
  if (std::isnan(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string FormatValue(double v, const std::string& unit) {
  if (std::isnan(v)) return "n/a";
  if (unit.rfind("ops/s", 0) == 0) {
    if (v >= 1e6) return Num(v / 1e6, 2) + " M " + unit;
    return Num(v / 1e3, 0) + " K " + unit;
  }
  if (unit == "GB/s") return Num(v, 2) + " GB/s";
  if (unit == "MB/s") return Num(v, 0) + " MB/s";
  if (unit == "%") return Num(v, 1) + " %";
  if (unit == "B/object") return Num(v, 0) + " B/object";
  if (unit.empty()) return Num(v, 2);
  return Num(v, 2) + " " + unit;
}

std::string FormatRatio(double r) { return std::isnan(r) ? "" : Num(r, 2) + "x"; }

std::string FormatReference(const Row& r) {
  if (r.reference.empty()) return "";
  return r.reference + " " + FormatValue(r.ref_value, r.unit);
}

std::string Verdict(const Row& r) {
  std::string v = r.Verdict();
  if (v == "MISSED") {
    const double x = r.Compared();
    if (!std::isnan(x) && r.target != 0) {
      const double by = r.better == Better::kHigher ? (1 - x / r.target) * 100 : (x / r.target - 1) * 100;
      v += " by " + Num(by, 0) + "%";
    }
  }
  return v;
}

std::string Pad(const std::string& s, size_t n) {
  // Width in characters, not bytes: the strings here are ASCII.
  return s.size() >= n ? s : s + std::string(n - s.size(), ' ');
}

std::string Escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '|') o += "\\|";
    else o += c;
  }
  return o;
}

}  // namespace

std::string FormatTable(const Report& rep) {
  std::ostringstream os;
  os << "spillway bench: " << rep.machine << " " << rep.date << (rep.quick ? " (quick)" : "")
     << ", medians of repetitions; ratio = spillway / reference measured in the same run\n"
     << "load average at start " << rep.details.value("loadavg_start", std::string()) << ", at end "
     << rep.details.value("loadavg_end", std::string()) << "\n";
  int section = 0;
  int met = 0, missed = 0, unmeasured = 0;
  for (const Row& r : rep.rows) {
    if (r.section != section) {
      section = r.section;
      os << "\n" << SectionTitle(section) << "\n";
      os << "  " << Pad("figure", 92) << Pad("value", 20) << Pad("reference", 38) << Pad("ratio", 8)
         << Pad("target", 32) << "verdict\n";
    }
    os << "  " << Pad(r.figure, 92) << Pad(FormatValue(r.value, r.unit), 20) << Pad(FormatReference(r), 38)
       << Pad(FormatRatio(r.ratio), 8) << Pad(r.target_text, 32) << Verdict(r) << "\n";
    if (!r.note.empty() && (std::isnan(r.value) || r.skipped)) os << "      (" << r.note << ")\n";
    if (!r.reference_command.empty()) os << "      reference: " << r.reference_command << "\n";
    const std::string v = r.Verdict();
    met += v == "MET";
    missed += v == "MISSED";
    unmeasured += v == "NOT MEASURED";
  }
  os << "\ntargets: " << met << " met, " << missed << " missed";
  if (unmeasured) os << ", " << unmeasured << " not measured";
  os << "\n";
  return os.str();
}

std::string FormatMarkdown(const Report& rep) {
  std::ostringstream os;
  os << "# spillway bench: " << rep.machine << ", " << rep.date << (rep.quick ? " (quick)" : "") << "\n\n";
  os << "Produced by `" << rep.command << "` (started " << rep.started_at << "). Every ratio compares "
     << "spillway with a reference measured **in the same run**, interleaved repetition by repetition; figures "
     << "are medians over the repetitions (per-repetition values are in the JSON file). GB/s = 1e9 bytes/s, "
     << "MB/s = 1e6 bytes/s.\n\n";
  os << "- machine: " << rep.details.value("machine_description", std::string()) << "\n";
  if (rep.details.contains("source_revision")) {
    os << "- source: `" << rep.details.value("source_revision", std::string())
       << "` (git describe of the tree the binary was built from; -dirty: uncommitted changes in it)";
    if (rep.details.contains("checkout_revision")) {
      os << "; run in a checkout at `" << rep.details.value("checkout_revision", std::string()) << "`";
    }
    os << "\n";
  }
  os << "- scratch directory: " << rep.details.value("scratch", std::string()) << " ("
     << rep.details.value("scratch_fs", std::string()) << ")\n";
  const int reps = rep.details.value("reps", 0);
  os << "- repetitions: " << reps << "; wall time of the run: "
     << Num(rep.details.value("seconds", 0.0), 0) << " s, CPU time used (with child processes): "
     << Num(rep.details.value("cpu_seconds", 0.0), 0) << " s\n";
  if (reps > 1 && reps % 2 == 1 && rep.details.contains("spill")) {
    // Section 1 alternates which runs first, fio's references or the
    // engine; a ratio moves with that order by up to a fifth (1 MiB spills),
    // so an odd count weights one side.
    os << "- section 1 with an odd number of repetitions: " << (reps + 1) / 2 << " of " << reps
       << " measured fio's references right before the engine's run and " << reps / 2
       << " right after it; a median over them leans to the first order (even counts balance it; the JSON's "
          "`order` says which each was)\n";
  }
  os << "- load average (1, 5, 15 min) at the start: " << rep.details.value("loadavg_start", std::string())
     << ", at the end: " << rep.details.value("loadavg_end", std::string())
     << ". Other work shared the machine: absolute figures are lower than on an idle machine; the ratios "
     << "compare figures taken under the same load.\n\n";

  int met = 0, missed = 0;
  for (const Row& r : rep.rows) {
    met += r.Verdict() == "MET";
    missed += r.Verdict() == "MISSED";
  }
  os << "**Targets: " << met << " met, " << missed << " missed.**\n\n";
  if (!rep.details.value("png", std::string()).empty()) {
    os << "![plots](" << rep.details.value("png", std::string()) << ")\n\n";
  }
  int section = 0;
  for (const Row& r : rep.rows) {
    if (r.section != section) {
      section = r.section;
      os << "\n## " << SectionTitle(section) << "\n\n";
      os << "| figure | value | reference | ratio | target | verdict |\n| --- | --- | --- | --- | --- | --- |\n";
    }
    std::string verdict = Verdict(r);
    if (verdict.rfind("MISSED", 0) == 0) verdict = "**" + verdict + "**";
    std::string value = FormatValue(r.value, r.unit);
    if (!r.note.empty() && (std::isnan(r.value) || r.skipped)) value += " (" + r.note + ")";
    os << "| " << Escape(r.figure) << " | " << Escape(value) << " | " << Escape(FormatReference(r)) << " | "
       << FormatRatio(r.ratio) << " | " << Escape(r.target_text) << " | " << verdict << " |\n";
    if (r.section == 6 && rep.details.contains("gpu_targets_markdown")) {
      os << "\nGPU targets as reported in " << rep.details.value("gpu_reference", std::string())
         << " (H200 machine, not measured in this run):\n\n"
         << rep.details.value("gpu_targets_markdown", std::string()) << "\n";
    }
  }
  bool commands = false;
  for (const Row& r : rep.rows) {
    if (r.reference_command.empty()) continue;
    if (!commands) os << "\n## Reference commands\n\n";
    commands = true;
    os << "- " << Escape(r.figure) << ": `" << r.reference_command << "`\n";
  }
  os << "\n## How each figure is measured\n\n";
  for (const std::string& n : rep.notes) os << "- " << n << "\n";
  os << "\n## Reproduce\n\n```\n" << rep.command << "\n```\n";
  return os.str();
}

nlohmann::json ToJson(const Report& rep) {
  nlohmann::json j;
  j["machine"] = rep.machine;
  j["date"] = rep.date;
  j["started_at"] = rep.started_at;
  j["command"] = rep.command;
  j["quick"] = rep.quick;
  auto num = [](double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); };
  nlohmann::json rows = nlohmann::json::array();
  for (const Row& r : rep.rows) {
    nlohmann::json samples = nlohmann::json::array();
    for (double s : r.samples) samples.push_back(num(s));
    rows.push_back({{"id", r.id}, {"section", r.section}, {"figure", r.figure}, {"value", num(r.value)},
                    {"unit", r.unit}, {"reference", r.reference}, {"reference_value", num(r.ref_value)},
                    {"ratio", num(r.ratio)}, {"target", num(r.target)},
                    {"better", r.better == Better::kHigher ? "higher" : "lower"}, {"target_text", r.target_text},
                    {"verdict", r.Verdict()}, {"note", r.note}, {"samples", samples}, {"skipped", r.skipped},
                    {"reference_command", r.reference_command}});
  }
  j["rows"] = rows;
  nlohmann::json series = nlohmann::json::array();
  for (const Series& s : rep.series) {
    nlohmann::json pts = nlohmann::json::array();
    for (auto [x, y] : s.points) pts.push_back({num(x), num(y)});
    series.push_back({{"plot", s.plot}, {"name", s.name}, {"points", pts}});
  }
  j["series"] = series;
  j["notes"] = rep.notes;
  j["details"] = rep.details;
  return j;
}

namespace {

// "4 KiB", "1 MiB", "1.5 GiB": a size as a tick label.
std::string SizeLabel(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, bytes == std::floor(bytes) ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

// xtics at the sizes the series measured (at most about ten, evenly thinned).
std::string SizeTics(const std::vector<const Series*>& shown) {
  std::set<double> xs;
  for (const Series* s : shown) {
    for (auto [x, y] : s->points) {
      if (!std::isnan(x) && x > 0 && !std::isnan(y) && y > 0) xs.insert(x);
    }
  }
  const size_t step = xs.size() > 10 ? (xs.size() + 9) / 10 : 1;
  std::string out = "set xtics (";
  size_t i = 0, n = 0;
  for (double x : xs) {
    if (i++ % step != 0) continue;
    out += (n++ ? ", '" : "'") + SizeLabel(x) + "' " + std::to_string(x);
  }
  return out + ")";
}

}  // namespace

// The PNG: one panel per measured curve, and per section one panel of the
// ratios to their same-run references with each target drawn across its bar
// (green met, red missed). Unrelated data sets (the codec corpora) are bars,
// not lines; legends sit under each panel, off the data.
std::string DrawPlots(const Report& rep, const std::string& png_path) {
  if (!HaveProgram("gnuplot")) return "gnuplot is not installed: no plots drawn";
  struct Panel {
    std::string plot, title, xlabel, ylabel, setup;
    bool bars = false;     // x is a category (data set), not a quantity
    bool bytes_x = false;  // x is a size: ticks at the measured sizes, labelled "4 KiB", "1 MiB"
  };
  const std::vector<Panel> panels = {
      {"spill", "host <-> file vs fio", "object size", "GB/s", "set logscale x 2", false, true},
      {"peer", "spill vs zict.File peer", "object size", "GB/s", "set logscale x 2; set logscale y", false, true},
      {"codec_c", "compress, 1 MiB chunks", "data set", "MB/s",
       "set logscale y; set xtics ('float32' 0, 'int64' 1, 'text' 2); set xrange [-0.5:2.5]", true},
      {"codec_d", "decompress, 1 MiB chunks", "data set", "MB/s",
       "set logscale y; set xtics ('float32' 0, 'int64' 1, 'text' 2); set xrange [-0.5:2.5]", true},
      {"incompressible", "codec cost on random data", "object size", "% over none",
       "set logscale x 2; set yrange [0:*]", false, true},
      {"small", "small objects, host tier", "object size", "ops/s", "set logscale x 2; set logscale y", false, true},
      {"scaling_count", "time vs objects spilled", "objects", "seconds", "set logscale xy"},
      {"scaling_bytes", "time vs bytes spilled", "bytes", "seconds", "set logscale xy", false, true},
  };
  // The series each panel shows: only panels with a measured point are drawn.
  std::vector<std::pair<const Panel*, std::vector<const Series*>>> drawn;
  for (const Panel& p : panels) {
    std::vector<const Series*> shown;
    for (const Series& s : rep.series) {
      if (s.plot != p.plot) continue;
      bool any = false;
      for (auto [x, y] : s.points) any |= !std::isnan(x) && !std::isnan(y) && y > 0;
      if (any) shown.push_back(&s);
    }
    if (!shown.empty()) drawn.emplace_back(&p, std::move(shown));
  }
  // Ratio rows (a reference and a target), by section.
  std::map<int, std::vector<const Row*>> ratio_rows;
  for (const Row& r : rep.rows) {
    if (!r.reference.empty() && !std::isnan(r.ratio) && r.ratio > 0 && !std::isnan(r.target)) {
      ratio_rows[r.section].push_back(&r);
    }
  }
  std::ostringstream gp;
  const int panel_count = static_cast<int>(drawn.size() + ratio_rows.size());
  if (panel_count == 0) return "nothing measured to plot";
  const int rows_of_panels = (panel_count + 2) / 3;
  gp << "set terminal pngcairo size 1800," << 520 * rows_of_panels << " font ',9' noenhanced\n";
  gp << "set output '" << png_path << "'\n";
  int idx = 0;
  std::map<std::pair<std::string, std::string>, std::string> block;
  for (const Series& s : rep.series) {
    const std::string name = "$d" + std::to_string(idx++);
    gp << name << " << EOD\n";
    for (auto [x, y] : s.points) {
      if (!std::isnan(x) && !std::isnan(y) && y > 0) gp << x << " " << y << "\n";
    }
    gp << "EOD\n";
    block[{s.plot, s.name}] = name;
  }
  for (const auto& [section, rows] : ratio_rows) {
    gp << "$r" << section << " << EOD\n";
    int i = 0;
    for (const Row* r : rows) {
      std::string label = r->id;
      std::replace(label.begin(), label.end(), '"', '\'');
      gp << i++ << " " << r->ratio << " " << r->target << " " << (r->Verdict() == "MET" ? 1 : 0) << " \"" << label
         << "\"\n";
    }
    gp << "EOD\n";
  }
  std::string revision = rep.details.value("source_revision", std::string());
  std::replace(revision.begin(), revision.end(), '\'', '`');
  gp << "set multiplot layout " << rows_of_panels << ",3 title 'spillway bench: " << rep.machine << ", "
     << rep.date << (revision.empty() ? "" : ", " + revision) << (rep.quick ? " (quick)" : "") << "'\n";
  const char* kKey = "set key below horizontal font ',8' samplen 2\n";
  for (const auto& [panel, shown] : drawn) {
    const Panel& p = *panel;
    gp << "reset\nset grid\n" << kKey;
    gp << "set title '" << p.title << "'\nset xlabel '" << p.xlabel << "'\nset ylabel '" << p.ylabel << "'\n"
       << p.setup << "\n";
    if (p.bytes_x) gp << SizeTics(shown) << "\n";
    std::vector<std::string> plots;
    const double width = 0.8 / static_cast<double>(shown.size());
    if (p.bars) gp << "set style fill solid 0.8 border -1\nset boxwidth " << width << " absolute\n";
    for (size_t i = 0; i < shown.size(); ++i) {
      const std::string& data = block[{shown[i]->plot, shown[i]->name}];
      if (p.bars) {
        const double offset = -0.4 + width * (static_cast<double>(i) + 0.5);
        plots.push_back(data + " using ($1+(" + std::to_string(offset) + ")):2 with boxes title '" + shown[i]->name + "'");
      } else {
        plots.push_back(data + " using 1:2 with linespoints title '" + shown[i]->name + "'");
      }
    }
    gp << "plot ";
    for (size_t i = 0; i < plots.size(); ++i) gp << (i ? ", " : "") << plots[i];
    gp << "\n";
  }
  for (const auto& [section, rows] : ratio_rows) {
    double lo = 1e300, hi = 0;
    for (const Row* r : rows) {
      lo = std::min({lo, r->ratio, r->target});
      hi = std::max({hi, r->ratio, r->target});
    }
    gp << "reset\nset grid ytics\n" << kKey;
    gp << "set title 'section " << section << ": ratio to the same-run reference, target drawn'\n";
    gp << "set ylabel 'x reference'\nset xtics rotate by 30 right font ',7'\nset style fill solid 0.7 border -1\n";
    gp << "set boxwidth 0.7 absolute\nset xrange [-0.6:" << rows.size() - 0.4 << "]\nset xtics (";
    for (size_t i = 0; i < rows.size(); ++i) {
      std::string label = rows[i]->id;  // "codec.int64.lz4.compress": the section's prefix said once, in the title
      if (const size_t dot = label.find('.'); dot != std::string::npos && rows.size() > 1) label = label.substr(dot + 1);
      std::replace(label.begin(), label.end(), '\'', '`');
      gp << (i ? ", " : "") << "'" << label << "' " << i;
    }
    gp << ")\n";
    if (hi / lo > 20) gp << "set logscale y\nset yrange [" << lo / 2 << ":" << hi * 2 << "]\n";
    else gp << "set yrange [0:" << hi * 1.15 << "]\n";
    gp << "plot $r" << section << " using 1:($4==1?$2:1/0) with boxes lc rgb '#2ca02c' title 'met', "
       << "$r" << section << " using 1:($4==0?$2:1/0) with boxes lc rgb '#d62728' title 'missed', "
       << "$r" << section << " using ($1-0.45):3:(0.9):(0) with vectors nohead lw 3 lc rgb 'black' title 'target'\n";
  }
  gp << "unset multiplot\n";
  char tmpl[] = "/tmp/spillway-bench-XXXXXX.gp";
  const int fd = ::mkstemps(tmpl, 3);
  if (fd < 0) return "cannot create a gnuplot script in /tmp";
  const std::string script = gp.str();
  const bool wrote = ::write(fd, script.data(), script.size()) == static_cast<ssize_t>(script.size());
  ::close(fd);
  if (!wrote) return "cannot write the gnuplot script";
  int rc = 0;
  const std::string out = RunCapture("gnuplot " + ShellQuote(tmpl), &rc);
  // SPILLWAY_BENCH_PLOT_SCRIPT=FILE keeps the script (docs/bench.md): to restyle a plot, and for tests.
  if (const char* keep = std::getenv("SPILLWAY_BENCH_PLOT_SCRIPT"); keep != nullptr && *keep != '\0') {
    std::error_code ec;
    std::filesystem::copy_file(tmpl, keep, std::filesystem::copy_options::overwrite_existing, ec);
  }
  ::unlink(tmpl);
  if (rc != 0) return "gnuplot failed: " + out.substr(0, 300);
  return "";
}

}  // namespace spillway::bench
