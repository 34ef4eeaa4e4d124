// Helpers shared by the FileTier tests (file_tier_test.cc,
// file_tier_read_test.cc) and the file tier's conformance cases: objects of
// seeded random buffers, storing a batch with its room reserved, and damaging
// one byte of a segment through a FileIo.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "spillway/file_io.h"
#include "test_util.h"
#include "tier_conformance.h"
#include "tiers/file_tier.h"
#include "tiers/segment.h"

namespace spillway::testing {

// An object `key` of buffers of `sizes` bytes, their contents seeded by `seed`.
inline TestObject MakeObj(const std::string& key, std::vector<size_t> sizes, uint64_t seed) {
  TestObject o;
  o.key = key;
  for (size_t i = 0; i < sizes.size(); ++i) o.bufs.push_back(RandomBytes(sizes[i], seed * 31 + i));
  return o;
}

// Stores `objs` as one batch, reserving each object's estimate first (as the
// engine's placement does).
inline StatusOr<std::vector<Location>> StoreAll(Tier& tier, std::vector<TestObject>& objs) {
  std::vector<ObjectView> views;
  for (TestObject& o : objs) {
    views.push_back(o.view());
    tier.ForceReserve(tier.ReserveEstimate(views.back()));
  }
  return tier.Store(views);
}

// Flips byte `at` of segment `segment` in `dir`, through `io` (so in-memory
// files are damaged as disk ones are). O_DIRECT wants whole aligned blocks, so
// the block around the byte is read, changed and written back.
inline Status FlipByteAt(FileIo& io, const std::string& dir, uint32_t segment, uint64_t at) {
  OpenOptions o;
  o.write = true;
  auto f = io.Open(dir + "/" + Segment::FileName(segment), o);
  if (!f.ok()) return f.status();
  const uint64_t block = at / kIoAlign * kIoAlign;
  std::unique_ptr<std::byte, decltype(&std::free)> buf(
      static_cast<std::byte*>(std::aligned_alloc(kIoAlign, kIoAlign)), &std::free);
  Status st = io.Read(*f, block, buf.get(), kIoAlign);
  if (st.ok()) {
    buf.get()[at - block] ^= std::byte{0x5a};
    st = io.Write(*f, block, buf.get(), kIoAlign);
  }
  (void)io.Close(*f);
  return st;
}

}  // namespace spillway::testing
