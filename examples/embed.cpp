// embed.cpp: how an application embeds spillway through its YAML file.
//
// It opens the tier chain named on the command line (default
// examples/tiers.yaml), stores "results" made of a small header and a large
// payload frame, reads one back while it is pinned, and prints statistics.
// Build it as an outside project against an installed spillway:
//   cmake --install build --prefix /tmp/spillway-prefix
//   cmake -S examples/embed -B /tmp/embed -DCMAKE_PREFIX_PATH=/tmp/spillway-prefix
//   cmake --build /tmp/embed && /tmp/embed/embed examples/tiers.yaml
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <spillway/engine.h>

namespace {

// A "task result" as a framework would serialize it: a header and frames.
struct Result {
  std::string header;
  std::vector<std::byte> payload;
};

Result MakeResult(int i, size_t bytes) {
  Result r;
  r.header = "{\"task\": " + std::to_string(i) + ", \"dtype\": \"u1\"}";
  r.payload.resize(bytes);
  for (size_t j = 0; j < bytes; ++j) r.payload[j] = std::byte((i * 131 + j) & 0xff);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string config = argc > 1 ? argv[1] : "examples/tiers.yaml";
  auto opened = spillway::Engine::OpenFile(config);
  if (!opened.ok()) {
    std::fprintf(stderr, "cannot open %s: %s\n", config.c_str(), opened.status().ToString().c_str());
    return 1;
  }
  spillway::Engine& engine = **opened;

  // Store more than the first tier holds: the engine spills the oldest results.
  const uint64_t first_tier = engine.config().tiers.front().capacity_bytes;
  const size_t payload = 4 << 20;
  const int count = static_cast<int>(2 * first_tier / payload) + 1;
  for (int i = 0; i < count; ++i) {
    Result r = MakeResult(i, payload);
    std::span<const std::byte> frames[2] = {
        std::as_bytes(std::span<const char>(r.header.data(), r.header.size())), r.payload};
    spillway::Status s = engine.Put("result/" + std::to_string(i), frames);
    if (!s.ok()) {
      std::fprintf(stderr, "put result/%d: %s\n", i, s.ToString().c_str());
      return 1;
    }
  }

  // Read the oldest result back: it was spilled, so this reads it from disk,
  // verifies its checksum and promotes it. The handle pins it while we look.
  auto handle = engine.Get("result/0");
  if (!handle.ok()) {
    std::fprintf(stderr, "get result/0: %s\n", handle.status().ToString().c_str());
    return 1;
  }
  Result want = MakeResult(0, payload);
  auto header = handle->buffer(0);
  auto frame = handle->buffer(1);
  const bool same = header.size() == want.header.size() &&
                    std::memcmp(header.data(), want.header.data(), header.size()) == 0 &&
                    frame.size() == want.payload.size() &&
                    std::memcmp(frame.data(), want.payload.data(), frame.size()) == 0;
  std::printf("result/0: %zu-byte header + %zu-byte frame, %s\n", header.size(), frame.size(),
              same ? "verified" : "WRONG BYTES");
  handle->Release();

  if (spillway::Status s = engine.Flush(); !s.ok()) {
    std::fprintf(stderr, "flush: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("%s", spillway::FormatStatsTable(engine.Stats()).c_str());
  return same ? 0 : 1;
}
