// libFuzzer target for the config loader: any bytes must give diagnostics,
// never a crash, hang or sanitizer report. Filesystem probes are off so runs
// touch nothing; sizes and ${VAR} expansion are fuzzed through the loader and
// directly.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "config/expand.h"
#include "base/units.h"
#include "spillway/config_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (64u << 10)) return 0;
  std::string_view text(reinterpret_cast<const char*>(data), size);

  spillway::LoadOptions options;
  options.check_filesystem = false;
  options.create_dirs = false;
  options.all_profiles = (size % 2) == 0;
  options.gpu.emplace();
  options.gpu->built_with_cuda = (size % 3) != 0;
  options.gpu->device_total_bytes = {80ull << 30};
  spillway::LoadResult result = spillway::LoadConfigString(text, "<fuzz>", options);
  for (const auto& d : result.errors) {
    if (d.line < 0 || d.column < 0) __builtin_trap();
  }
  (void)result.Summary();

  auto size_spec = spillway::ParseSize(text);
  if (size_spec.ok()) {
    (void)spillway::FormatBytes(spillway::ResolveSize(*size_spec, 1ull << 40));
  }
  auto expanded = spillway::ExpandVars(text, [](const std::string& name) -> std::optional<std::string> {
    if (name.size() % 2) return std::nullopt;
    return name;
  });
  (void)expanded;
  return 0;
}
