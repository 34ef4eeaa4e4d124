// Segment: one append-only file of packed records inside a file tier's
// directory ("seg-00000042.spw"). Many objects share a segment, so small
// objects never become a file each and the file count stays bounded by
// capacity / segment size.
//
// Space is reclaimed two ways: the fully covered 4 KiB blocks inside a freed
// record are punched out at once, and a sealed segment whose records are all
// freed is deleted.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "spillway/file_io.h"

namespace spillway {

struct Segment {
  uint32_t id = 0;
  FileHandle file;
  FileIo* io = nullptr;
  // Guarded by the owning stripe's mutex:
  uint64_t end = 0;      // bytes reserved so far (append offset)
  uint64_t allocated = 0;  // bytes preallocated on disk
  bool sealed = false;   // no more appends; deleted when live_records reaches 0
  // Updated without the stripe lock:
  std::atomic<uint64_t> live_bytes{0};
  std::atomic<int64_t> live_records{0};
  std::atomic<bool> dirty{false};  // written since the last Sync
  std::mutex header_mu;  // serializes read-modify-write of header blocks (erase marks)
  // What the segment manifest says of it (tiers/segment_manifest.h): records
  // whose write completed, and the end of the furthest one. Guarded by publish_mu.
  std::mutex publish_mu;
  uint64_t published_records = 0;
  uint64_t published_end = 0;

  ~Segment() {
    if (io != nullptr && file.is_open()) (void)io->Close(file);
  }

  static std::string FileName(uint32_t id) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "seg-%08u.spw", id);
    return buf;
  }
  // Parses "seg-00000042.spw"; false for any other name.
  static bool ParseFileName(const std::string& name, uint32_t* id) {
    unsigned v = 0;
    int n = 0;
    if (name.size() != 16 || std::sscanf(name.c_str(), "seg-%8u.spw%n", &v, &n) != 1 || n != 16) {
      return false;
    }
    *id = v;
    return true;
  }
};

using SegmentPtr = std::shared_ptr<Segment>;

}  // namespace spillway
