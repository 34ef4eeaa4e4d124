// Blob (tiers/blob.h): inline small objects, extra buffer sizes, custom
// deleters, and large allocations (2 MiB aligned for huge pages).
#include <doctest/doctest.h>

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "tiers/blob.h"
#include "tiers/host_tier.h"

using namespace spillway;

TEST_CASE("blobs: inline small objects, extra buffer sizes and custom deleters") {
  BlobPtr small = NewHostBlob(nullptr, Blob::kInlineMaxBytes, {Blob::kInlineMaxBytes});
  REQUIRE(small);
  CHECK(reinterpret_cast<uintptr_t>(small->data()) % 16 == 0);
  std::memset(small->data(), 0xab, small->size());  // the whole tail is writable (ASan checks)
  CHECK(small->num_buffers() == 1);
  CHECK(small->buffer(0).size() == Blob::kInlineMaxBytes);
  CHECK(small->buffer_sizes() == std::vector<uint64_t>{Blob::kInlineMaxBytes});

  BlobPtr multi = NewHostBlob(nullptr, 30, {10, 0, 20});
  CHECK(multi->num_buffers() == 3);
  CHECK(multi->buffer(1).size() == 0);
  CHECK(multi->buffer(2).data() == multi->data() + 10);
  std::vector<std::span<const std::byte>> spans;
  multi->Spans(&spans);
  CHECK(spans.size() == 3);
  CHECK(multi->buffer_sizes() == std::vector<uint64_t>{10, 0, 20});

  BlobPtr none = NewHostBlob(nullptr, 0, {});
  CHECK(none->num_buffers() == 0);
  none->Spans(&spans);
  CHECK(spans.empty());

  BlobPtr big = NewHostBlob(nullptr, 1 << 20, {1 << 20});
  CHECK(reinterpret_cast<uintptr_t>(big->data()) % 64 == 0);

  int freed = 0;
  {
    std::byte* p = Blob::AllocateHost(64);
    Blob b(p, 64, {64}, MemoryKind::kHost, [&freed](std::byte* d, uint64_t n) {
      CHECK(n == 64);
      std::free(d);
      ++freed;
    });
  }
  CHECK(freed == 1);
}

TEST_CASE("blobs: large host allocations are 2 MiB aligned, hold every byte and free cleanly") {
  // Blob::AllocateLargeHost: huge-page-able memory from kHugePageMinBytes on.
  for (uint64_t size : {uint64_t{Blob::kHugePageMinBytes - 64}, uint64_t{Blob::kHugePageMinBytes}, uint64_t{(9ull << 20) + 13}}) {
    CAPTURE(size);
    BlobPtr b = NewHostBlob(nullptr, size, {size});
    REQUIRE(b);
    const auto at = reinterpret_cast<uintptr_t>(b->data());
    CHECK(at % 64 == 0);
    if (size >= Blob::kHugePageMinBytes) CHECK(at % (2u << 20) == 0);
    std::memset(b->data(), 0xA5, size);  // every byte is ours (ASan would see an overrun)
    CHECK(b->data()[size - 1] == std::byte{0xA5});
  }
}

namespace {
// Whether the page at `p` is mapped in this process (mincore fails with
// ENOMEM for an address no mapping covers).
bool Mapped(const void* p) {
  unsigned char v = 0;
  void* page = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{4095});
  return mincore(page, 4096, &v) == 0 || errno != ENOMEM;
}

// The mapping of /proc/self/maps that starts at `p`, as "start-end", or "".
std::string MappingAt(const void* p) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range;
    in >> range;
    const auto dash = range.find('-');
    if (std::stoull(range.substr(0, dash), nullptr, 16) == reinterpret_cast<uintptr_t>(p)) return range;
  }
  return "";
}
}  // namespace

TEST_CASE("blobs: a large host allocation is a mapping of its own, gone when it is freed") {
  // Carved from the C library's heaps, a freed block stayed resident (and
  // kept its huge-page hint on the heap).
  // Warm the C library's mmap threshold the way a Dask worker does (freed
  // mapped blocks raise it), so a heap block would be handed out below.
  for (int i = 0; i < 4; ++i) {
    void* volatile q = std::malloc((24u << 20) + 4096 * i);
    REQUIRE(q != nullptr);
    std::memset(q, 0, 4096);
    std::free(q);
  }
  for (uint64_t size : {uint64_t{Blob::kHugePageMinBytes}, uint64_t{(7ull << 20) + 5000}, uint64_t{64ull << 20}}) {
    CAPTURE(size);
    std::byte* p = Blob::AllocateHost(size);
    REQUIRE(p != nullptr);
    std::memset(p, 0x5A, size);
    const std::string range = MappingAt(p);
    CHECK_MESSAGE(!range.empty(), "no mapping starts at the block");
    CHECK(Mapped(p + size - 1));
    Blob::FreeHost(p, size);
    CHECK_FALSE(Mapped(p));
    CHECK_FALSE(Mapped(p + size - 1));
  }
  // A Blob frees its bytes the same way.
  std::byte* at = nullptr;
  {
    BlobPtr b = NewHostBlob(nullptr, 9ull << 20, {9ull << 20});
    REQUIRE(b);
    at = b->data();
    std::memset(at, 1, b->size());
    CHECK(Mapped(at));
  }
  CHECK_FALSE(Mapped(at));
}
