// ProcessResidentBytes, TrimProcessHeap (base/process_memory.h).
#include "base/process_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace spillway {

uint64_t ProcessResidentBytes() {
  // Read with one read(2): this runs every 100 ms on the mover's tick.
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  unsigned long long size = 0, resident = 0;
  if (std::sscanf(buf, "%llu %llu", &size, &resident) != 2) return 0;
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

void TrimProcessHeap() {
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
}

}  // namespace spillway
