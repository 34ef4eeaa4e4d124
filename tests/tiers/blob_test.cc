// Blob (tiers/blob.h): inline small objects, extra buffer sizes, custom
// deleters, and large allocations (2 MiB aligned for huge pages).
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
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
