// spillway_crash_child ROOT RUN_SEED [none|zstd|lz4]: the crash test's victim.
// spillway_crash_child --open DIR: recovery only (see OpenOnly).
// Opens (and so recovers) the persistent tier under ROOT, then runs the
// workload of crash_workload.h until it is killed, appending the durable op
// count to ROOT/durable (fsynced) after each successful Flush. Exit 0 when
// the workload ends, 2 on a usage error, 3 when the engine fails.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "crash_workload.h"
#include "spillway/engine.h"

using namespace spillway;

namespace {

bool WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

// --open DIR: opens (recovers) one persistent file tier at DIR and prints
// "objects N"; the hostile-input tests run it under a memory limit.
int OpenOnly(const std::string& dir) {
  Config c;
  c.source = "<crash child --open>";
  TierConfig f;
  f.name = "probe";
  f.kind = TierKind::kFile;
  f.capacity_bytes = 1ull << 30;
  f.capacity_text = "1GiB";
  f.medium = Medium::kSsd;
  f.paths = {dir};
  f.persistent = true;
  c.tiers.push_back(f);
  auto engine = Engine::Open(c);
  if (!engine.ok()) {
    std::fprintf(stderr, "crash child: open: %s\n", engine.status().ToString().c_str());
    return 3;
  }
  std::printf("objects %llu\n", static_cast<unsigned long long>((*engine)->Stats().objects));
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--open") return OpenOnly(argv[2]);
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s ROOT RUN_SEED [none|zstd|lz4]\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const uint64_t run_seed = std::strtoull(argv[2], nullptr, 10);
  CodecKind codec = CodecKind::kNone;
  if (argc > 3) {
    auto c = CodecKindFromName(argv[3]);
    if (!c) return 2;
    codec = *c;
  }
  const int durable = ::open((root + "/durable").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  const int started = ::open((root + "/started").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (durable < 0 || started < 0) {
    std::perror("crash child: side files");
    return 3;
  }
  EngineOptions eo;
  auto engine = Engine::Open(crash::CrashConfig(root, codec), eo);
  if (!engine.ok()) {
    std::fprintf(stderr, "crash child: open: %s\n", engine.status().ToString().c_str());
    return 3;
  }
  std::vector<std::byte> bytes;
  for (uint64_t i = 0; i < crash::kMaxOps; ++i) {
    if (::pwrite(started, &i, sizeof(i), 0) != static_cast<ssize_t>(sizeof(i))) return 3;
    const crash::Op op = crash::OpAt(run_seed, i);
    bytes.resize(op.size);
    FillPattern(op.content, 0, bytes);
    std::vector<std::span<const std::byte>> parts;
    uint64_t off = 0;
    for (uint32_t b = 0; b < op.buffers; ++b) {
      const uint64_t n = b + 1 == op.buffers ? op.size - off : op.size / op.buffers;
      parts.emplace_back(bytes.data() + off, n);
      off += n;
    }
    Status st = (*engine)->Put(op.key, parts);
    if (!st.ok()) {
      std::fprintf(stderr, "crash child: put %s: %s\n", op.key.c_str(), st.ToString().c_str());
      return 3;
    }
    if ((i + 1) % crash::kFlushEvery == 0) {
      st = (*engine)->Flush();
      if (!st.ok()) {
        std::fprintf(stderr, "crash child: flush: %s\n", st.ToString().c_str());
        return 3;
      }
      if (!WriteAll(durable, std::to_string(i + 1) + "\n") || ::fsync(durable) != 0) return 3;
    }
  }
  return 0;
}
