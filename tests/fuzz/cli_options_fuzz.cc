// libFuzzer target for the CLI's numeric options (tools/cli_util.h): the
// input, split at newlines, is an argv parsed by CLI11 with the validators
// the subcommands use, without running a command. Whatever the words, a
// parse either fails with a usage error or leaves every given option inside
// its range: never a wrapped negative, a NaN, an infinity or a crash. Each
// word also goes to the parsers directly, with the same promise.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tools/cli_util.h"

namespace {

using spillway::ParseRealNumber;
using spillway::cli::ParseSizeRange;
using spillway::ParseWholeNumber;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

bool AllDigits(std::string_view s) {
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return !s.empty();
}

// The parsers on one word: what they accept is in range and, for whole
// numbers, exactly the digits given (no sign, no wrap).
void ParseWord(const std::string& w) {
  uint64_t n = 0;
  std::string why;
  if (ParseWholeNumber(w, 1, 256, &n, &why)) {
    Check(n >= 1 && n <= 256 && AllDigits(w));
  } else {
    Check(!why.empty());
  }
  if (ParseWholeNumber(w, 0, UINT64_MAX, &n, &why)) {
    const size_t first = std::min(w.find_first_not_of('0'), w.size() - 1);
    Check(AllDigits(w) && std::to_string(n) == w.substr(first));
  }
  double x = 0;
  if (ParseRealNumber(w, 0, 1e8, /*above_lo=*/true, &x, &why)) Check(std::isfinite(x) && x > 0 && x <= 1e8);
  if (ParseRealNumber(w, 0.01, 1000, /*above_lo=*/false, &x, &why)) Check(x >= 0.01 && x <= 1000);
  uint64_t lo = 0, hi = 0;
  if (ParseSizeRange(w, &lo, &hi, &why)) Check(lo <= hi && hi > 0);
}

// The options of `spillway stress` and `spillway demo`, as they register them.
void ParseArgv(std::vector<std::string> words) {
  CLI::App app{"fuzz"};
  uint64_t ops = 0, keys = 1, seed = 0, object_bytes = 65;
  int threads = 1, worker = -1;
  double seconds = 1, multiple = 1;
  std::string sizes, sections = "1";
  auto* o_ops = app.add_option("--ops", ops)->transform(spillway::cli::WholeNumber(0, UINT64_MAX));
  auto* o_keys = app.add_option("--keys", keys)->transform(spillway::cli::WholeNumber(1, 100000000));
  app.add_option("--seed", seed)->transform(spillway::cli::WholeNumber(0, UINT64_MAX));
  auto* o_threads = app.add_option("--threads,-t", threads)->transform(spillway::cli::WholeNumber(1, 256));
  auto* o_worker = app.add_option("--worker", worker)->transform(spillway::cli::WholeNumber(0, 4095));
  auto* o_seconds = app.add_option("--seconds", seconds)->transform(spillway::cli::RealNumber(0, 1e8, true));
  auto* o_multiple = app.add_option("--multiple", multiple)->transform(spillway::cli::RealNumber(0.01, 1000.0));
  auto* o_bytes = app.add_option("--object-bytes", object_bytes)
                      ->transform(spillway::cli::SizeArg())
                      ->check(CLI::Range(65ull, 1ull << 32));
  app.add_option("--sizes", sizes);
  app.add_option("--sections", sections)->check(spillway::cli::IntList(1, 6));
  app.allow_extras();
  std::vector<std::string> argv;  // CLI11 takes the words in reverse order
  for (auto it = words.rbegin(); it != words.rend(); ++it) argv.push_back(*it);
  try {
    app.parse(argv);
  } catch (const CLI::ParseError&) {
    return;  // a usage error: what a bad value must give
  }
  // The validator's rewrite is what CLI11 reads: plain decimal, never octal or wrapped.
  if (o_ops->count()) Check(std::to_string(ops) == o_ops->results().back());
  if (o_keys->count()) Check(keys >= 1 && keys <= 100000000);
  if (o_threads->count()) Check(threads >= 1 && threads <= 256);
  if (o_worker->count()) Check(worker >= 0 && worker <= 4095);
  if (o_seconds->count()) Check(std::isfinite(seconds) && seconds > 0 && seconds <= 1e8);
  if (o_multiple->count()) Check(multiple >= 0.01 && multiple <= 1000);
  if (o_bytes->count()) Check(object_bytes >= 65 && object_bytes <= (1ull << 32));
  (void)seed;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::vector<std::string> words;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  while (true) {
    const size_t nl = text.find('\n');
    words.emplace_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  if (words.size() > 64) return 0;
  for (const std::string& w : words) ParseWord(w);
  ParseArgv(words);
  return 0;
}
